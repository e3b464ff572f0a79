// Property sweeps run in full in the Release pass; under AddressSanitizer (several times slower) the same
// test runs a leading part of the sweep, which still reaches every code path the sanitizer watches.
#pragma once

namespace deepinfer::test_support {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// How many rounds of a property sweep this build runs: `full` in Release, `sanitized` under ASan.
constexpr int RoundsForThisBuild(int full, int sanitized) { return kSanitizedBuild ? sanitized : full; }

}  // namespace deepinfer::test_support
