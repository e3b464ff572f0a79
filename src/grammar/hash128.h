// A 128-bit running hash (two independent 64-bit lanes) for content-addressed caches inside the grammar
// compiler: equal leaf rules, regular parts and sub-schemas are recognised by it without a comparison, so
// both lanes must agree for two contents to count as equal.
#pragma once

#include <cstdint>

namespace deepinfer::grammar {

struct Hash128 {
  uint64_t a = 0x243F6A8885A308D3ULL, b = 0x13198A2E03707344ULL;
  void Mix(uint64_t v) {
    a = (a ^ v) * 0x100000001B3ULL;
    a ^= a >> 29;
    b = (b + v) * 0x9E3779B97F4A7C15ULL;
    b ^= b >> 31;
  }
};

}  // namespace deepinfer::grammar
