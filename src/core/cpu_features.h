// What the CPU we run on can execute. Kernels compiled for several ISAs (cmake/Isa.cmake) use this to
// pick one at run time.
#pragma once

#include <string>

namespace deepinfer {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool amx_bf16 = false;

  bool has_avx2_set() const { return avx2 && fma && f16c; }
  bool has_avx512_set() const { return has_avx2_set() && avx512f && avx512bw && avx512dq && avx512vl; }
  bool has_avx512bf16_set() const { return has_avx512_set() && avx512_bf16 && avx512_vnni; }
  // "avx512bf16", "avx512", "avx2" or "scalar": the best kernel set this CPU runs.
  std::string best_isa() const;
  // Space-separated list of the flags that are present.
  std::string ToString() const;
};

// Detected once; DEEPINFER_ISA=scalar|avx2|avx512|avx512bf16 caps the result (for testing fallbacks).
const CpuFeatures& GetCpuFeatures();

}  // namespace deepinfer
