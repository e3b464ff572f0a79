// The instruction sets the kernels are compiled for, and the choice among them at run time.
#pragma once

#include <string_view>

namespace deepinfer::kernels {

enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Bf16 };

// The best ISA allowed by GetCpuFeatures() (so DEEPINFER_ISA caps it).
Isa BestIsa();
// Whether kernels for `isa` can run here (under the DEEPINFER_ISA cap).
bool IsaSupported(Isa isa);
std::string_view IsaName(Isa isa);

}  // namespace deepinfer::kernels
