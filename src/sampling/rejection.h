// Speculative sampling's acceptance rule for a draft token (the distribution-exact one, "rejection
// sampling"): accept the draft token x with probability min(1, p(x) / q(x)), where p is the target's
// distribution at the position and q the draft's; on rejection, draw from the normalised residual
// max(0, p − q). The token it returns is distributed as p whatever q is. A deterministic draft (prompt
// lookup, an argmax) has a one-hot q: x is accepted with probability p(x), and the residual is p without x.
#pragma once

#include <cstdint>
#include <span>

namespace deepinfer::sampling {

// p and q over the same ids (each summing to 1 within rounding), the draft token, and two uniform draws in
// [0, 1): `accept_u` for the acceptance test, `residual_u` for the draw from the residual (in id order).
int32_t AcceptOrResample(std::span<const double> p, std::span<const double> q, int32_t draft, double accept_u,
                         double residual_u);

}  // namespace deepinfer::sampling
