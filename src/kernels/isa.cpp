#include "kernels/isa.h"

#include "core/cpu_features.h"

namespace deepinfer::kernels {

bool IsaSupported(Isa isa) {
  const CpuFeatures& cpu = GetCpuFeatures();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu.has_avx2_set();
    case Isa::kAvx512:
      return cpu.has_avx512_set();
    case Isa::kAvx512Bf16:
      return cpu.has_avx512bf16_set();
  }
  return false;
}

Isa BestIsa() {
  static const Isa best = [] {
    for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
      if (IsaSupported(isa)) return isa;
    }
    return Isa::kScalar;
  }();
  return best;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
  }
  return "unknown";
}

}  // namespace deepinfer::kernels
