// The counter analysis (see CountReach in nfa.h): from each state of a counted automaton, the numbers of
// units it can still read before it may stop, and whether a counter decides them from (count, dmin, dmax).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "grammar/components.h"
#include "grammar/nfa.h"

namespace deepinfer::grammar {

namespace {

// The counts each state can be entered with (bit c: after c units), by propagation from the entries
// (count 0); `unknown` where counts may pass 63.
void EntryCounts(const std::vector<std::vector<std::pair<uint32_t, uint8_t>>>& succ, const std::vector<uint8_t>& live,
                 const CountEntries& entries, std::vector<uint64_t>* counts, std::vector<uint8_t>* unknown) {
  const size_t n = succ.size();
  counts->assign(n, 0);
  unknown->assign(n, 0);
  std::vector<uint32_t> work;
  std::vector<uint8_t> queued(n, 0);
  for (uint32_t s : entries.starts)
    if (s < n && live[s]) (*counts)[s] |= 1, queued[s] = 1, work.push_back(s);
  std::vector<std::vector<uint32_t>> resumes(n);
  for (auto [from, to] : entries.resumes)
    if (from < n && to < n) resumes[from].push_back(to);
  while (!work.empty()) {
    const uint32_t s = work.back();
    work.pop_back();
    queued[s] = 0;
    const uint64_t c = (*counts)[s];
    auto reach = [&](uint32_t t, bool tick) {
      if (!live[t]) return;
      const uint64_t add = tick ? c << 1 : c;
      const bool lost = (*unknown)[s] || (tick && (c >> 63) != 0);
      if ((add & ~(*counts)[t]) == 0 && (!lost || (*unknown)[t])) return;
      (*counts)[t] |= add;
      if (lost) (*unknown)[t] = 1;
      if (!queued[t]) queued[t] = 1, work.push_back(t);
    };
    for (auto [t, tick] : succ[s]) reach(t, tick != 0);
    for (uint32_t t : resumes[s]) reach(t, false);
  }
}

// A state whose remaining counts `reach` (bit L: L more units, as CountReach computes them) have gaps,
// under a counter with both bounds (min > 0, max finite): whether some dmin/dmax decide, for every count
// the state can be entered with (`entry`), exactly whether a path finishes within [min, max], as the
// counter tests it (count + dmin <= max and count + dmax >= min). Beyond 63 units an unbounded state that
// can read every count from 32 to 63 is taken to read every count past them too (CountReach takes an
// unbounded interval to continue likewise); for others, counts past 63 are unknown.
bool DecideByEntry(uint64_t reach, bool unbounded, uint64_t entry, bool entry_unknown, uint32_t min,
                   uint32_t max, uint32_t* dmin, uint32_t* dmax) {
  if (entry_unknown || entry == 0 || min == 0 || max == kUnbounded) return false;
  const bool tail = unbounded && (reach >> 32) == 0xFFFFFFFFu;  // every count from 64 on, taken to continue
  if (!tail && (unbounded || (reach >> 63) != 0)) {
    // Counts past 63 are unknown: decide only where no window reaches them.
    if (static_cast<uint64_t>(max) - __builtin_ctzll(entry) >= 64) return false;
  }
  // Whether some count r in [a, b] can be read (past 63: only under `tail`).
  auto any_in = [&](uint64_t a, uint64_t b) {
    if (a > b) return false;
    if (b >= 64 && tail) return true;
    if (a > 63) return false;
    const uint64_t hi_bits = b >= 63 ? ~uint64_t{0} : ((uint64_t{1} << (b + 1)) - 1);
    return (reach & hi_bits & (~uint64_t{0} << a)) != 0;
  };
  const uint32_t cmin = static_cast<uint32_t>(__builtin_ctzll(entry));
  const uint32_t cmax = static_cast<uint32_t>(63 - __builtin_clzll(entry));
  if (cmin > max) {
    *dmin = max + 1;  // entered only past the most: never finishes (and is never live)
    *dmax = 0;
    return true;
  }
  // Candidates: the least and the most count a path can read that some entry count could use.
  const uint64_t lo_end = min > cmax ? min - cmax : 0, hi_end = max - cmin;
  int64_t least = -1, most = -1;
  for (uint64_t r = lo_end; r <= std::min<uint64_t>(hi_end, 63); ++r)
    if ((reach >> r) & 1) {
      least = static_cast<int64_t>(r);
      break;
    }
  if (least < 0 && tail && hi_end >= 64) least = static_cast<int64_t>(std::max<uint64_t>(lo_end, 64));
  if (tail && hi_end >= 64) {
    most = static_cast<int64_t>(hi_end);
  } else {
    for (int64_t r = static_cast<int64_t>(std::min<uint64_t>(hi_end, 63)); r >= static_cast<int64_t>(lo_end); --r)
      if ((reach >> r) & 1) {
        most = r;
        break;
      }
  }
  if (least < 0 || most < 0) {
    *dmin = max + 1;
    *dmax = 0;
  } else {
    *dmin = static_cast<uint32_t>(least);
    *dmax = static_cast<uint32_t>(most);
  }
  for (uint64_t bits = entry; bits != 0; bits &= bits - 1) {
    const uint64_t c = static_cast<uint64_t>(__builtin_ctzll(bits));
    const bool finishes = c <= max && any_in(min > c ? min - c : 0, max - c);
    const bool counter = c + *dmin <= max && c + *dmax >= min;
    if (finishes != counter) return false;
  }
  return true;
}

}  // namespace

bool CountReach(const std::vector<std::vector<std::pair<uint32_t, uint8_t>>>& succ, const std::vector<uint8_t>& exit,
                const std::vector<uint8_t>& live, const std::vector<uint8_t>& relax, std::vector<uint32_t>* dmin,
                std::vector<uint32_t>* dmax, std::vector<uint8_t>* unbounded, const CountEntries* entries) {
  const size_t n = succ.size();
  // reach[i]: bit L set when some path from i to an exit reads exactly L more units (L < 64).
  std::vector<uint64_t> reach(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (live[i] && exit[i]) reach[i] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (!live[i]) continue;
      uint64_t r = reach[i];
      for (auto [t, tick] : succ[i]) r |= tick ? reach[t] << 1 : reach[t];
      if (r != reach[i]) reach[i] = r, changed = true;
    }
  }
  // Unbounded: the state reaches a cycle that reads a unit (every live state reaches an exit). Cycles
  // are found as strongly connected components (iterative Tarjan).
  const std::vector<int32_t> comp = StronglyConnectedComponents(
      static_cast<uint32_t>(n), [&](uint32_t v) { return succ[v].size(); },
      [&](uint32_t v, size_t k) { return succ[v][k].first; });
  unbounded->assign(n, 0);
  std::vector<std::vector<uint32_t>> preds(n);
  std::vector<uint32_t> work;
  for (uint32_t i = 0; i < n; ++i) {
    if (!live[i]) continue;
    for (auto [t, tick] : succ[i]) {
      preds[t].push_back(i);
      if (tick && comp[t] == comp[i] && !(*unbounded)[i]) (*unbounded)[i] = 1, work.push_back(i);
    }
  }
  while (!work.empty()) {
    uint32_t t = work.back();
    work.pop_back();
    for (uint32_t p : preds[t])
      if (!(*unbounded)[p]) (*unbounded)[p] = 1, work.push_back(p);
  }
  // Where both bounds bite, a counter decides from (count, state) alone only when the reachable counts
  // form an interval: from the least one up to the most (or on without end). Gaps (units in pairs, say)
  // are then left to the unrolled automaton. Beyond 63 units, an unbounded interval is taken to continue.
  dmin->assign(n, 0);
  dmax->assign(n, 0);
  std::vector<uint64_t> entry;  // computed when a state first needs it
  std::vector<uint8_t> entry_unknown;
  for (size_t i = 0; i < n; ++i) {
    if (!live[i]) continue;
    const uint8_t rel = relax.empty() ? 0 : relax[i];
    const uint64_t r = reach[i];
    if (r == 0) return false;  // the shortest path reads 64 units or more
    const int lo = __builtin_ctzll(r);
    const int hi = 63 - __builtin_clzll(r);
    if (rel & kCountGapsOk) {
      // Only the least count, and the most where it is known, are used.
      (*dmin)[i] = static_cast<uint32_t>(lo);
      if ((*unbounded)[i]) {
        (*dmax)[i] = kUnbounded;
      } else {
        if (hi == 63 && !(rel & kCountNoMost)) return false;  // the most may be past what reach holds
        (*dmax)[i] = static_cast<uint32_t>(hi);
      }
      continue;
    }
    bool interval;
    if ((*unbounded)[i]) {
      interval = r == (~uint64_t{0} << lo);
      (*dmin)[i] = static_cast<uint32_t>(lo);
      (*dmax)[i] = kUnbounded;
    } else {
      const uint64_t want = (hi - lo == 63) ? ~uint64_t{0} : (((uint64_t{1} << (hi - lo + 1)) - 1) << lo);
      interval = hi < 63 && r == want;
      (*dmin)[i] = static_cast<uint32_t>(lo);
      (*dmax)[i] = static_cast<uint32_t>(hi);
    }
    if (interval) continue;
    if (!entries) return false;
    if (entry.empty()) EntryCounts(succ, live, *entries, &entry, &entry_unknown);
    if (!DecideByEntry(r, (*unbounded)[i] != 0, entry[i], entry_unknown[i] != 0, entries->min[i], entries->max[i],
                       &(*dmin)[i], &(*dmax)[i]))
      return false;
  }
  return true;
}


}  // namespace deepinfer::grammar
