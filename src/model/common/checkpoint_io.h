// Whole-checkpoint reads both families do at load: faulting the mapped weights in, and the fingerprint
// that tells checkpoints apart (ModelInfo::weights_fingerprint).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/hash.h"
#include "core/safetensors.h"
#include "core/status.h"

namespace deepinfer::model {

// Reads one byte of every page of every tensor `skip` does not name (null: none skipped), reporting
// progress in bytes of the tensors read.
void Prefault(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& skip,
              const std::function<void(int64_t, int64_t)>& progress);

// Drops this process's pages of the tensors `which` names (the whole pages inside each): they leave its
// resident memory and are read again from the file only if touched.
void ReleaseTensorPages(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& which);

// XXH3-128 over `dir`/config.json, each tensor's name, dtype, shape and size, and a few sampled bytes of
// each (its first, middle and last 64): header-identical checkpoints with different weights (another seed,
// another fine-tune) get different fingerprints, without reading the weights.
Result<Hash128> WeightsFingerprint(const std::string& dir, const Checkpoint& checkpoint);

}  // namespace deepinfer::model
