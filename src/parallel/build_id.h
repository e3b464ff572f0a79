// What tells two deepinfer binaries apart, so that the ranks of a unit can check they all run the same
// build: two builds of one version can still differ in code (a rebuilt tree, another compiler) and then
// compute different tokens or exchange incompatible messages.
#pragma once

#include <string>

namespace deepinfer::parallel {

// The running executable's GNU build id in hex (the linker derives it from the code it links), or, for an
// executable linked without one, "file:" and a hash of the executable file. Computed once.
const std::string& ExecutableBuildId();

}  // namespace deepinfer::parallel
