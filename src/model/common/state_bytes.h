// The byte form of a model's per-sequence state outside the blocks (CausalLM::ExportState / ImportState):
// a tag naming the family and its layout, then fields in a fixed order, each vector as its element count
// and its raw little-endian elements. The reader takes untrusted bytes: every count is checked against
// the size the importing model expects before anything is copied, and a short or overlong input is refused.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace deepinfer::model {

class StateWriter {
 public:
  explicit StateWriter(uint32_t tag) { Scalar(tag); }

  template <class T>
  void Scalar(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  template <class T>
  void Vector(const std::vector<T>& values) {
    Scalar<uint64_t>(values.size());
    const size_t at = bytes_.size();
    bytes_.resize(at + values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(bytes_.data() + at, values.data(), values.size() * sizeof(T));
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class StateReader {
 public:
  // `what` names the state in messages ("DeepSeek-V4 sequence state").
  StateReader(std::span<const uint8_t> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  Status ExpectTag(uint32_t tag) {
    uint32_t got = 0;
    DI_RETURN_IF_ERROR(Scalar(&got));
    if (got != tag) return Status::InvalidArgument(what_ + ": not a state of this model's kind");
    return Status::Ok();
  }
  template <class T>
  Status Scalar(T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes_.size() - at_ < sizeof(T)) return Short();
    std::memcpy(out, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return Status::Ok();
  }
  // A vector of exactly `expected` elements, or none when `may_be_empty`.
  template <class T>
  Status Vector(std::vector<T>* out, size_t expected, bool may_be_empty = false) {
    uint64_t count = 0;
    DI_RETURN_IF_ERROR(Scalar(&count));
    if (count != expected && !(may_be_empty && count == 0))
      return Status::InvalidArgument(what_ + ": a field holds " + std::to_string(count) + " values, not " +
                                     std::to_string(expected));
    return Elements(out, count);
  }
  // A vector of a multiple of `unit` elements, at most `most` (the input's own length bounds it too).
  template <class T>
  Status VectorOfUnits(std::vector<T>* out, size_t unit, size_t most) {
    uint64_t count = 0;
    DI_RETURN_IF_ERROR(Scalar(&count));
    if (count > most || (unit > 0 && count % unit != 0) || (unit == 0 && count != 0))
      return Status::InvalidArgument(what_ + ": a field holds " + std::to_string(count) + " values");
    return Elements(out, count);
  }
  Status ExpectEnd() const {
    if (at_ != bytes_.size()) return Status::InvalidArgument(what_ + ": trailing bytes");
    return Status::Ok();
  }

 private:
  Status Short() const { return Status::InvalidArgument(what_ + ": truncated"); }
  template <class T>
  Status Elements(std::vector<T>* out, uint64_t count) {
    if ((bytes_.size() - at_) / sizeof(T) < count) return Short();
    out->resize(static_cast<size_t>(count));
    if (count > 0) std::memcpy(out->data(), bytes_.data() + at_, static_cast<size_t>(count) * sizeof(T));
    at_ += static_cast<size_t>(count) * sizeof(T);
    return Status::Ok();
  }

  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
  std::string what_;
};

}  // namespace deepinfer::model
