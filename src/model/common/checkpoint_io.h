// Whole-checkpoint reads both families do at load: faulting the mapped weights in, and the fingerprint
// that tells checkpoints apart (ModelInfo::weights_fingerprint).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/hash.h"
#include "core/safetensors.h"
#include "core/status.h"
#include "model/common/expert_parallel.h"

namespace deepinfer::model {

// Reads one byte of every page of every tensor `skip` does not name (null: none skipped), reporting
// progress in bytes of the tensors read.
void Prefault(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& skip,
              const std::function<void(int64_t, int64_t)>& progress);

// Drops this process's pages of the tensors `which` names (the whole pages inside each): they leave its
// resident memory and are read again from the file only if touched.
void ReleaseTensorPages(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& which);

// The routed experts' tensors of `checkpoint` (`layers.<N>.ffn.experts.<E>.*`; routed layer i is the i-th
// layer number holding experts, in increasing order) as pages an expert placement reads in and gives back.
// Holds pointers into the checkpoint's mapping: it must not outlive the checkpoint.
std::shared_ptr<const ExpertWeightPages> CheckpointExpertPages(const Checkpoint& checkpoint);

// XXH3-128 over `dir`/config.json, each tensor's name, dtype, shape and size, and a few sampled bytes of
// each (its first, middle and last 64): header-identical checkpoints with different weights (another seed,
// another fine-tune) get different fingerprints, without reading the weights.
Result<Hash128> WeightsFingerprint(const std::string& dir, const Checkpoint& checkpoint);

}  // namespace deepinfer::model
