#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace deepinfer {
namespace {

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;           // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  f.fma = os_avx && (ecx & (1u << 12));
  f.f16c = os_avx && (ecx & (1u << 29));
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = os_avx && (ebx & (1u << 5));
  f.avx512f = os_avx512 && (ebx & (1u << 16));
  f.avx512dq = os_avx512 && (ebx & (1u << 17));
  f.avx512bw = os_avx512 && (ebx & (1u << 30));
  f.avx512vl = os_avx512 && (ebx & (1u << 31));
  f.avx512_vnni = os_avx512 && (ecx & (1u << 11));
  f.amx_bf16 = os_amx && (edx & (1u << 22));
  unsigned eax1, ebx1, ecx1, edx1;
  __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
  f.avx512_bf16 = os_avx512 && (eax1 & (1u << 5));
  return f;
}

void ApplyCap(CpuFeatures& f) {
  const char* cap = std::getenv("DEEPINFER_ISA");
  if (cap == nullptr) return;
  if (std::strcmp(cap, "avx512bf16") == 0) return;
  f.amx_bf16 = false;
  if (std::strcmp(cap, "avx512") == 0) {
    f.avx512_bf16 = f.avx512_vnni = false;
    return;
  }
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512_bf16 = f.avx512_vnni = false;
  if (std::strcmp(cap, "avx2") == 0) return;
  f.avx2 = f.fma = f.f16c = false;  // "scalar" or anything unknown: the portable path
}

}  // namespace

std::string CpuFeatures::best_isa() const {
  if (has_avx512bf16_set()) return "avx512bf16";
  if (has_avx512_set()) return "avx512";
  if (has_avx2_set()) return "avx2";
  return "scalar";
}

std::string CpuFeatures::ToString() const {
  std::string out;
  auto add = [&](bool present, const char* name) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512dq, "avx512dq");
  add(avx512vl, "avx512vl");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vnni, "avx512_vnni");
  add(amx_bf16, "amx_bf16");
  return out;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f = Detect();
    ApplyCap(f);
    return f;
  }();
  return features;
}

}  // namespace deepinfer
