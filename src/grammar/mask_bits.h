// Single bits of a token mask (32 token ids per word), shared by the matcher's files: one definition, so that
// the files can be compiled together as one unity batch.
#pragma once

#include <cstdint>

namespace deepinfer::grammar {

inline void SetBit(uint32_t* bits, int32_t id) { bits[id >> 5] |= 1u << (id & 31); }
inline void ClearBit(uint32_t* bits, int32_t id) { bits[id >> 5] &= ~(1u << (id & 31)); }
inline bool TestBit(const uint32_t* bits, int32_t id) { return bits[id >> 5] >> (id & 31) & 1; }

}  // namespace deepinfer::grammar
