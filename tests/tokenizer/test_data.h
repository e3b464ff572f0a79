// Shared by the tokenizer tests: the committed corpus and golden files (tests/tokenizer/data, written by
// tools/tokenizer/gen_golden.py from the Hugging Face tokenizers oracle). The tokenizers themselves are the
// builtin ones (tokenizer/locate.h: LoadTokenizer("deepseek-v3")), the same bytes the oracle read.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer_test {

inline std::string DataDir() { return std::string(DEEPINFER_SOURCE_DIR) + "/tests/tokenizer/data"; }

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> LoadCorpus() {
  std::vector<std::string> out;
  std::istringstream in(ReadAll(DataDir() + "/corpus.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  return out;
}

struct BigCase {
  uint64_t seed;
  uint64_t min_bytes;
  uint64_t token_count;
  uint64_t hash;
};
struct DecodeCase {
  std::vector<int32_t> ids;
  bool skip_special;
  std::string text;
};
struct Golden {
  std::vector<std::vector<int32_t>> text_ids;
  std::vector<std::vector<int32_t>> added_ids;
  std::vector<BigCase> big;
  std::vector<DecodeCase> decode;
  uint64_t id_limit = 0;
  uint64_t single_decode_hash = 0;
};

class Reader {
 public:
  explicit Reader(std::string data) : data_(std::move(data)) {}
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; pos_ < data_.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ADD_FAILURE() << "golden file truncated";
    return 0;
  }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8 && pos_ < data_.size(); ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return v;
  }
  std::vector<int32_t> Ids(uint64_t n) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(Varint());
    return ids;
  }
  std::string Bytes(size_t n) {
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

inline Golden LoadGolden(const std::string& name) {
  std::string data = ReadAll(DataDir() + "/golden_" + name + ".bin");
  Golden g;
  if (data.compare(0, 5, "DITG1") != 0) {
    ADD_FAILURE() << "bad golden file " << name;
    return g;
  }
  Reader r(data.substr(5));
  uint64_t entries = r.Varint();
  for (uint64_t i = 0; i < entries; ++i) {
    g.text_ids.push_back(r.Ids(r.Varint()));
    uint64_t k = r.Varint();
    g.added_ids.push_back(k == 0 ? g.text_ids.back() : r.Ids(k - 1));
  }
  for (uint64_t n = r.Varint(); n > 0; --n) {
    BigCase b;
    b.seed = r.Varint();
    b.min_bytes = r.Varint();
    b.token_count = r.Varint();
    b.hash = r.U64();
    g.big.push_back(b);
  }
  for (uint64_t n = r.Varint(); n > 0; --n) {
    DecodeCase c;
    c.ids = r.Ids(r.Varint());
    c.skip_special = r.Varint() != 0;
    c.text = r.Bytes(r.Varint());
    g.decode.push_back(std::move(c));
  }
  g.id_limit = r.Varint();
  g.single_decode_hash = r.U64();
  return g;
}

// The generator's 1 MB inputs (tools/tokenizer/corpus.py big_input): corpus entries picked by splitmix64.
inline std::string BigInput(const std::vector<std::string>& corpus, uint64_t seed, uint64_t min_bytes) {
  uint64_t state = seed;
  std::string out;
  while (out.size() < min_bytes) {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    out += corpus[z % corpus.size()];
  }
  return out;
}

inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = 0xCBF29CE484222325ULL) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h;
}

inline uint64_t HashIds(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int32_t id : ids) {
    uint32_t v = static_cast<uint32_t>(id);
    uint8_t le[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
                     static_cast<uint8_t>(v >> 24)};
    h = Fnv1a64(le, 4, h);
  }
  return h;
}

}  // namespace deepinfer::tokenizer_test
