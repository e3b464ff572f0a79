#include "sampling/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float ExpNp(float x) {
  x = std::max(x, -87.3f);
  // Round x·log2(e) to the nearest integer n with the 1.5·2^23 trick (vectorizes; no libm call), then
  // e^x = 2^n · e^r with |r| <= ln2/2, r computed with ln 2 split in two so that n·ln2_hi is exact.
  const float t = x * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t e = static_cast<int32_t>(n) + 127;
  return p * std::bit_cast<float>(e << 23);
}

// A key whose unsigned order is the float order (for finite values and +-inf).
inline uint32_t SortableKey(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Sum of p over ids in id order, in four double lanes (a fixed order, so the same bits every time).
double SumOver(const std::vector<float>& p, const std::vector<int32_t>& ids) {
  double s[4] = {0, 0, 0, 0};
  const size_t n = ids.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s[0] += p[ids[i]];
    s[1] += p[ids[i + 1]];
    s[2] += p[ids[i + 2]];
    s[3] += p[ids[i + 3]];
  }
  for (; i < n; ++i) s[0] += p[ids[i]];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

constexpr int64_t kBlock = 256;

// Dense kernels over a row, written in eight independent lanes so that they vectorize without
// reassociating anything: each gives the same bits on every run and machine.
float MaxOf(const float* x, int64_t n) {
  float lane[8];
  for (float& l : lane) l = kNegInf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = std::max(lane[j], x[i + j]);  // NaN never wins
  }
  float m = kNegInf;
  for (float l : lane) m = l > m ? l : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

int64_t FirstEqual(const float* x, int64_t n, float v) {
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == v) return i;
  }
  return -1;
}

// p = exp(x - shift), and 0 where x is -inf.
void ExpShifted(const float* x, float shift, float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float e = ExpNp(x[i] - shift);
    p[i] = x[i] == kNegInf ? 0.0f : e;
  }
}

// Sums of kBlock-element blocks (eight float lanes each, then double), and their total.
double BlockSums(const float* p, int64_t n, std::vector<double>* blocks) {
  blocks->clear();
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = b;
    for (; i + 8 <= end; i += 8) {
      for (int j = 0; j < 8; ++j) lane[j] += p[i + j];
    }
    double sum = 0;
    for (float l : lane) sum += l;
    for (; i < end; ++i) sum += p[i];
    blocks->push_back(sum);
    total += sum;
  }
  return total;
}

// The first id whose cumulative weight (blocks in order, then elements in the block) exceeds target.
int32_t DrawDense(const float* p, int64_t n, const std::vector<double>& blocks, double target) {
  double cumulative = 0;
  size_t b = 0;
  while (b + 1 < blocks.size() && cumulative + blocks[b] <= target) cumulative += blocks[b++];
  int32_t last = -1;
  for (int64_t i = static_cast<int64_t>(b) * kBlock; i < std::min(n, static_cast<int64_t>(b + 1) * kBlock); ++i) {
    if (p[i] == 0) continue;
    last = static_cast<int32_t>(i);
    cumulative += p[i];
    if (cumulative > target) return last;
  }
  if (last >= 0) return last;
  for (int64_t i = n - 1; i >= 0; --i) {  // rounding left the target past the end: the last possible token
    if (p[i] != 0) return static_cast<int32_t>(i);
  }
  return 0;
}

}  // namespace

float ExpNonPositive(float x) { return ExpNp(x); }

void TokenCounts::SetPrompt(std::span<const int32_t> prompt) {
  counts_.clear();
  for (int32_t t : prompt) counts_.try_emplace(t, 0);
}

void RawLogprobs(std::span<const float> logits, int32_t id, int k, SampledToken* out) {
  const int64_t v = static_cast<int64_t>(logits.size());
  const float max = MaxOf(logits.data(), v);
  double sum = 0;
  if (max != kNegInf) {
    std::vector<float> p(static_cast<size_t>(v));
    ExpShifted(logits.data(), max, p.data(), v);
    for (float& e : p) e = e == e ? e : 0.0f;  // NaN logits weigh nothing
    std::vector<double> blocks;
    sum = BlockSums(p.data(), v, &blocks);
  }
  const double lse = static_cast<double>(max) + std::log(sum);
  out->logprob = static_cast<float>(static_cast<double>(logits[id]) - lse);
  out->top.clear();
  if (k <= 0) return;
  // The k largest, by value then lower id: a small sorted list (k <= 20) against which most entries fail
  // the first comparison.
  std::vector<TopLogprob> top;
  top.reserve(static_cast<size_t>(k) + 1);
  for (int64_t i = 0; i < v; ++i) {
    const float l = logits[i];
    if (!(l == l)) continue;
    if (static_cast<int>(top.size()) == k && !(l > top.back().logprob)) continue;
    auto at = std::upper_bound(top.begin(), top.end(), l,
                               [](float value, const TopLogprob& e) { return value > e.logprob; });
    top.insert(at, TopLogprob{static_cast<int32_t>(i), l});
    if (static_cast<int>(top.size()) > k) top.pop_back();
  }
  for (TopLogprob& e : top) e.logprob = static_cast<float>(static_cast<double>(e.logprob) - lse);
  out->top = std::move(top);
}

void ApplyLogitProcessors(std::span<float> row, const SampleInputs& in) {
  const SamplingParams& params = *in.params;
  const int64_t v = static_cast<int64_t>(row.size());
  for (const auto& [id, bias] : params.logit_bias) {
    if (id >= 0 && id < v) row[id] += bias;
  }
  for (int32_t id : in.banned) {
    if (id >= 0 && id < v) row[id] = kNegInf;
  }
  const bool repetition = params.repetition_penalty != 1.0;
  if (in.counts && (repetition || params.presence_penalty != 0 || params.frequency_penalty != 0)) {
    const float rep = static_cast<float>(params.repetition_penalty);
    for (const auto& [id, count] : in.counts->counts()) {
      if (id < 0 || id >= v) continue;
      float& x = row[id];
      if (repetition) x = x > 0 ? x / rep : x * rep;
      if (count > 0) x -= static_cast<float>(params.frequency_penalty * count + params.presence_penalty);
    }
  }
  if (in.allowed) {
    std::span<const uint32_t> words = in.allowed->words();
    for (size_t w = 0; w < words.size(); ++w) {
      const uint32_t bits = words[w];
      if (bits == ~0u) continue;
      const int64_t base = static_cast<int64_t>(w) * 32;
      for (int b = 0; b < 32 && base + b < v; ++b) {
        if (!((bits >> b) & 1u)) row[base + b] = kNegInf;
      }
    }
    for (int64_t i = static_cast<int64_t>(words.size()) * 32; i < v; ++i) row[i] = kNegInf;
  }
  for (float& x : row) x = x == x ? x : kNegInf;
}

Result<SampledToken> Sampler::Sample(std::span<const float> logits, const SampleInputs& in) {
  const SamplingParams& params = *in.params;
  const int64_t v = static_cast<int64_t>(logits.size());
  const bool penalties = in.counts && (params.repetition_penalty != 1.0 || params.presence_penalty != 0 ||
                                       params.frequency_penalty != 0);
  if ((params.greedy() || params.top_k == 1) && params.logit_bias.empty() && in.banned.empty() && !penalties &&
      !in.allowed) {
    // Plain greedy reads the row in place.
    const float best = MaxOf(logits.data(), v);
    if (best == kNegInf) return Status::FailedPrecondition("no token can be sampled: every logit is -inf or NaN");
    SampledToken out;
    out.id = static_cast<int32_t>(FirstEqual(logits.data(), v, best));
    if (params.logprobs) RawLogprobs(logits, out.id, params.top_logprobs, &out);
    return out;
  }
  x_.assign(logits.begin(), logits.end());
  ApplyLogitProcessors(x_, in);
  float max = MaxOf(x_.data(), v);
  if (max == kNegInf)
    return Status::FailedPrecondition("no token can be sampled: the mask and bans exclude every token");
  const int32_t argmax = static_cast<int32_t>(FirstEqual(x_.data(), v, max));

  SampledToken out;
  if (params.greedy() || params.top_k == 1) {
    out.id = argmax;
  } else {
    const float temperature = static_cast<float>(params.temperature);
    if (temperature != 1.0f) {
      for (int64_t i = 0; i < v; ++i) x_[i] = x_[i] / temperature;
    }
    max = x_[argmax];
    p_.resize(static_cast<size_t>(v));
    ExpShifted(x_.data(), max, p_.data(), v);
    const bool filtered = (params.top_k > 0 && params.top_k < v) || params.top_p < 1.0 || params.min_p > 0;
    if (!filtered && in.draft < 0) {
      const double total = BlockSums(p_.data(), v, &blocks_);
      out.id = DrawDense(p_.data(), v, blocks_, UniformDraw(in.draw) * total);
    } else {
      ids_.clear();
      for (int64_t i = 0; i < v; ++i) {
        if (x_[i] != kNegInf) ids_.push_back(static_cast<int32_t>(i));
      }
      if (params.top_k > 0 && static_cast<size_t>(params.top_k) < ids_.size())
        KeepTop(/*weighted=*/false, static_cast<double>(params.top_k));
      if (params.top_p < 1.0) KeepTop(/*weighted=*/true, params.top_p * SumOver(p_, ids_));
      if (params.min_p > 0) {
        // p_ is relative to the most likely token (p = 1 there), so the threshold is min_p itself.
        const double threshold = params.min_p;
        std::erase_if(ids_, [&](int32_t id) { return static_cast<double>(p_[id]) < threshold; });
      }
      if (in.draft >= 0) {
        out.id = AcceptOrDraw(in.draft, in.draw);
      } else {
        const double target = UniformDraw(in.draw) * SumOver(p_, ids_);
        double cumulative = 0;
        out.id = ids_.back();
        for (int32_t id : ids_) {
          cumulative += p_[id];
          if (cumulative > target) {
            out.id = id;
            break;
          }
        }
      }
    }
  }
  if (params.logprobs) RawLogprobs(logits, out.id, params.top_logprobs, &out);
  return out;
}

// The kept candidates ids_ (ascending) with weights p_: the draft with probability p(draft), else an
// inverse-CDF draw over the others (the residual of a one-hot draft distribution).
int32_t Sampler::AcceptOrDraw(int32_t draft, const DrawKey& draw) const {
  const double total = SumOver(p_, ids_);
  const bool kept = std::binary_search(ids_.begin(), ids_.end(), draft);
  const double p_draft = kept ? static_cast<double>(p_[draft]) : 0.0;
  DrawKey accept = draw;
  accept.stream ^= 0x80000000u;  // its own stream: independent of the residual draw at the same position
  if (UniformDraw(accept) * total < p_draft) return draft;
  const double rest = total - p_draft;
  if (!(rest > 0)) return draft;
  const double target = UniformDraw(draw) * rest;
  double cumulative = 0;
  int32_t last = draft;
  for (int32_t id : ids_) {
    if (id == draft) continue;
    last = id;
    cumulative += p_[id];
    if (cumulative > target) return id;
  }
  return last;
}

// Keeps, of ids_, the first tokens in (scaled logit desc, id asc) order until their weight (1 each, or
// p) reaches `target`: a three-pass radix select over sortable keys of the scaled logits (11, 11 and 10
// bits), which costs a few passes over the candidates where a sort of the vocabulary would dominate.
void Sampler::KeepTop(bool weighted, double target) {
  const size_t n = ids_.size();
  keys_.resize(n);
  for (size_t j = 0; j < n; ++j) keys_[j] = SortableKey(x_[ids_[j]]);
  scratch_.resize(n);
  for (size_t j = 0; j < n; ++j) scratch_[j] = static_cast<int32_t>(j);
  auto weight = [&](size_t j) { return weighted ? static_cast<double>(p_[ids_[j]]) : 1.0; };
  // Four interleaved histograms: logits cluster in a few buckets, and one histogram would make every add
  // wait for the previous one to the same bucket.
  std::array<std::array<double, 2048>, 4> hists;
  std::array<double, 2048> hist;
  uint32_t prefix = 0, prefix_mask = 0;
  double above = 0;  // weight of the candidates whose key is above the prefix found so far
  static constexpr std::array<std::pair<int, int>, 3> kPasses = {{{21, 11}, {10, 11}, {0, 10}}};
  for (const auto& [shift, bits] : kPasses) {
    const uint32_t m = (1u << bits) - 1;
    for (auto& h : hists) std::fill(h.begin(), h.begin() + (m + 1), 0.0);
    const size_t count = scratch_.size();
    size_t i = 0;
    for (; i + 4 <= count; i += 4) {
      for (size_t lane = 0; lane < 4; ++lane) {
        const int32_t j = scratch_[i + lane];
        hists[lane][(keys_[j] >> shift) & m] += weight(static_cast<size_t>(j));
      }
    }
    for (; i < count; ++i) {
      const int32_t j = scratch_[i];
      hists[0][(keys_[j] >> shift) & m] += weight(static_cast<size_t>(j));
    }
    for (uint32_t b = 0; b <= m; ++b) hist[b] = (hists[0][b] + hists[1][b]) + (hists[2][b] + hists[3][b]);
    int64_t chosen = -1, last_nonempty = -1;
    double above_last = above;
    for (int64_t b = m; b >= 0; --b) {
      if (hist[b] == 0) continue;
      if (above + hist[b] >= target) {
        chosen = b;
        break;
      }
      last_nonempty = b;
      above_last = above;
      above += hist[b];
    }
    if (chosen < 0) {  // rounding left the target above the total: the boundary is the lowest bucket
      chosen = last_nonempty;
      above = above_last;
    }
    prefix |= static_cast<uint32_t>(chosen) << shift;
    prefix_mask |= m << shift;
    std::erase_if(scratch_, [&](int32_t j) { return (keys_[j] & prefix_mask) != prefix; });
  }
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    bool keep = keys_[j] > prefix;
    if (keys_[j] == prefix && above < target) {
      keep = true;
      above += weight(j);
    }
    if (keep) ids_[kept++] = ids_[j];
  }
  ids_.resize(kept);
}

}  // namespace deepinfer::sampling
