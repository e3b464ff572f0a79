#include "model/common/checkpoint_io.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "core/mapped_file.h"

namespace deepinfer::model {
namespace {

volatile uint8_t g_prefault_sink = 0;

}  // namespace

void Prefault(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& skip,
              const std::function<void(int64_t, int64_t)>& progress) {
  auto read = [&](const TensorInfo& t) { return !skip || !skip(t); };
  int64_t total = 0;
  for (const TensorInfo* t : checkpoint.tensors())
    if (read(*t)) total += static_cast<int64_t>(t->nbytes());
  int64_t done = 0;
  uint8_t sink = 0;
  for (const TensorInfo* t : checkpoint.tensors()) {
    if (!read(*t)) continue;
    const volatile uint8_t* p = t->data;
    for (uint64_t at = 0; at < t->nbytes(); at += 4096) sink ^= p[at];
    done += static_cast<int64_t>(t->nbytes());
    if (progress) progress(std::min(done, total), total);
  }
  if (progress) progress(total, total);
  g_prefault_sink = g_prefault_sink + sink;  // keeps the reads
}

void ReleaseTensorPages(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& which) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const TensorInfo* t : checkpoint.tensors()) {
    if (t->data == nullptr || !which(*t)) continue;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(t->data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(t->data) + t->nbytes()) / page * page;
    // A read-only private file mapping: the pages come back from the file if they are ever read again.
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

Result<Hash128> WeightsFingerprint(const std::string& dir, const Checkpoint& checkpoint) {
  DI_ASSIGN_OR_RETURN(std::string config, ReadFileToString(dir + "/config.json"));
  Hasher128 h;
  h.UpdateInt(config.size()).Update(config);
  for (const TensorInfo* t : checkpoint.tensors()) {
    h.UpdateInt(t->name.size()).Update(t->name).UpdateInt(static_cast<uint64_t>(t->dtype));
    h.UpdateInt(t->shape.size());
    for (int64_t dim : t->shape) h.UpdateInt(static_cast<uint64_t>(dim));
    const uint64_t bytes = t->nbytes();
    h.UpdateInt(bytes);
    const uint64_t sample = std::min<uint64_t>(64, bytes);
    h.Update(t->data, sample);
    h.Update(t->data + bytes / 2 - std::min(bytes / 2, sample / 2), sample);
    h.Update(t->data + bytes - sample, sample);
  }
  return h.Digest();
}

}  // namespace deepinfer::model
