#include "sampling/rejection.h"

#include <algorithm>

namespace deepinfer::sampling {

int32_t AcceptOrResample(std::span<const double> p, std::span<const double> q, int32_t draft, double accept_u,
                         double residual_u) {
  const auto x = static_cast<size_t>(draft);
  const double px = x < p.size() ? p[x] : 0.0, qx = x < q.size() ? q[x] : 0.0;
  // u < min(1, p/q) as u · q < p, which also accepts a token the draft could not have proposed (q = 0) only
  // when the target allows it.
  if (qx > 0 && accept_u * qx < px) return draft;
  double residual = 0;
  for (size_t i = 0; i < p.size(); ++i) residual += std::max(0.0, p[i] - (i < q.size() ? q[i] : 0.0));
  if (!(residual > 0)) return draft;  // p = q: every draft token is accepted
  const double target = residual_u * residual;
  double cumulative = 0;
  int32_t last = draft;
  for (size_t i = 0; i < p.size(); ++i) {
    const double r = std::max(0.0, p[i] - (i < q.size() ? q[i] : 0.0));
    if (r <= 0) continue;
    last = static_cast<int32_t>(i);
    cumulative += r;
    if (cumulative > target) return last;
  }
  return last;
}

}  // namespace deepinfer::sampling
