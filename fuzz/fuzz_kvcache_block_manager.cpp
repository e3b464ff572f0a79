// libFuzzer driver for the KV block manager: bytes become operations (see
// tests/kvcache/block_manager_driver.h); any broken invariant or leak aborts.
#include <cstdio>
#include <cstdlib>

#include "../tests/kvcache/block_manager_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const deepinfer::Status s = deepinfer::kvcache::test_support::RunBlockManagerOps(data, size);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::abort();
  }
  return 0;
}
