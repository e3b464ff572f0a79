// Locating committed test data from a test binary.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace deepinfer::test_support {

inline std::string SourcePath(const std::string& relative) { return std::string(DEEPINFER_SOURCE_DIR) + "/" + relative; }

inline std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace deepinfer::test_support
