// Loading the golden render corpora (tests/recipe/data/render/*.jsonl, written by
// tools/recipe/gen_requests.py): the first line holds a dictionary of long template paragraphs that the
// prompts reference as "\x01<index>\x01".
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::recipe {

using Json = nlohmann::ordered_json;

// Replaces every "\x01<index>\x01" with dictionary entry <index> (the generator's lossless compaction).
inline std::string Expand(const std::string& text, const std::vector<std::string>& dictionary) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find('\x01', pos);
    const size_t close = open == std::string::npos ? open : text.find('\x01', open + 1);
    if (close == std::string::npos) break;
    out.append(text, pos, open - pos);
    out += dictionary.at(std::stoul(text.substr(open + 1, close - open - 1)));
    pos = close + 1;
  }
  out.append(text, pos);
  return out;
}

inline std::vector<Json> LoadCorpus(const std::string& name) {
  std::ifstream in(std::string(DEEPINFER_SOURCE_DIR) + "/tests/recipe/data/render/" + name, std::ios::binary);
  std::vector<Json> lines;
  std::vector<std::string> dictionary;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json value = Json::parse(line);
    if (value.contains("dictionary")) {
      dictionary = value["dictionary"].get<std::vector<std::string>>();
      continue;
    }
    for (const char* key : {"v4", "v4.1", "v3.2"}) {
      if (value.contains(key) && value[key].is_string()) value[key] = Expand(value[key].get<std::string>(), dictionary);
    }
    lines.push_back(std::move(value));
  }
  return lines;
}

// The request body of a corpus line: its "body" text where the generator kept one (numbers such as -0 or
// 1E2 that a parsed value cannot spell), else its "request" value as JSON.
inline std::string RequestBody(const Json& line) {
  return line.contains("body") ? line["body"].get<std::string>() : line.at("request").dump();
}

// The deliberate deviations (tests/recipe/data/render/deviations.json), by tag.
inline std::vector<Json> LoadDeviations() {
  std::ifstream in(std::string(DEEPINFER_SOURCE_DIR) + "/tests/recipe/data/render/deviations.json", std::ios::binary);
  const Json all = Json::parse(in);
  std::vector<Json> tagged;
  for (const Json& d : all.at("deviations")) {
    if (d.contains("tag")) tagged.push_back(d);
  }
  return tagged;
}

// The deviation a corpus line is tagged with, if any.
inline const Json* DeviationOf(const Json& line) {
  static const std::vector<Json> deviations = LoadDeviations();
  if (!line.contains("tags")) return nullptr;
  for (const Json& tag : line["tags"]) {
    for (const Json& d : deviations) {
      if (d.at("tag") == tag) return &d;
    }
  }
  return nullptr;
}

// Where the prompt first differs, with some context, for a readable failure.
inline std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 80 ? i - 80 : 0;
  return "at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 200)).dump() +
         "\n  got:  " + Json(got.substr(from, 200)).dump();
}

inline std::string Fnv1a64Hex(const std::vector<int32_t>& ids) {
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) joined += ',';
    joined += std::to_string(ids[i]);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : joined) h = (h ^ c) * 0x100000001b3ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace deepinfer::recipe
