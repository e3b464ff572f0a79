// DSpark drafting internals (see v41_dspark.cpp).
#pragma once

#include "model/deepseek_v41/v41_internal.h"

namespace deepinfer::model::v41 {

// After a target forward pass: the context features of every row (target_inputs [n, targets · hidden], the
// target layers' attention inputs averaged over the streams) projected, normalised and turned into each
// draft layer's window K=V, stored in the sequences' draft rings.
void StoreDraftContext(Step& step, const float* target_inputs);

// One draft block per chunk (its rows: the anchor, then noise tokens) through the draft layers; leaves each
// state's draft_hidden ([rows, hidden], normalised).
void DraftBlock(Step& step);

// logits[0..vocab) += W2 · W1[token] (the Markov head's bias); returns the confidence head's
// σ(wᵀ [hidden ; W1[token]]) for the row whose normalised draft hidden state is `hidden`.
float MarkovBias(const Step& step, int32_t token, const float* hidden, float* logits);

}  // namespace deepinfer::model::v41
