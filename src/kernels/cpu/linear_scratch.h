// Internal: per-thread scratch memory for the Linear kernels (decoded weight panels), allocated by portable
// code so that no ISA-specific translation unit instantiates library containers.
#pragma once

#include <cstddef>

namespace deepinfer::kernels::cpu {

// A 64-byte aligned buffer of at least `floats` floats owned by the calling thread, valid until the
// thread's next call.
float* ThreadScratch(size_t floats);
// A second such buffer, for prepared rows of x that must stay valid while a kernel also uses ThreadScratch.
float* ThreadScratchX(size_t floats);

}  // namespace deepinfer::kernels::cpu
