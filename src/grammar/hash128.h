// A 128-bit running mix of 64-bit values (two independent lanes) for the grammar compiler's structural
// hashes: a regular part hashes its kids' hashes (AnalyseExprs) and a leaf rule its states and moves
// (LeafHashes), tens of thousands of small values mixed inline per grammar. Content given as bytes (a
// schema) is hashed with core's HashBytes instead. Equal contents are recognised by both lanes agreeing.
#pragma once

#include <cstdint>

namespace deepinfer::grammar {

struct Mixer128 {
  uint64_t a = 0x243F6A8885A308D3ULL, b = 0x13198A2E03707344ULL;
  void Mix(uint64_t v) {
    a = (a ^ v) * 0x100000001B3ULL;
    a ^= a >> 29;
    b = (b + v) * 0x9E3779B97F4A7C15ULL;
    b ^= b >> 31;
  }
};

}  // namespace deepinfer::grammar
