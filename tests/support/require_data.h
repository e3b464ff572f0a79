// For a test that needs data the repository does not carry: DI_SKIP_FOR_MISSING_DATA(why) skips it, except
// in CI (DEEPINFER_REQUIRE_DATA=1, set by scripts/test.sh), where the same line is a failure, so that a test
// cannot silently stop testing. The repository carries everything the tests need today (data/, the
// fixtures beside each test); a skip for missing data is for data that cannot be committed.
#pragma once

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace deepinfer::test_support {

inline bool RequireData() {
  const char* v = std::getenv("DEEPINFER_REQUIRE_DATA");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace deepinfer::test_support

#define DI_SKIP_FOR_MISSING_DATA(why)                                                          \
  do {                                                                                         \
    if (::deepinfer::test_support::RequireData()) {                                            \
      FAIL() << "missing data with DEEPINFER_REQUIRE_DATA=1: " << why;                         \
    }                                                                                          \
    GTEST_SKIP() << why;                                                                       \
  } while (false)
