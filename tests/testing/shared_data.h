// Locating ../shared (golden data, real models) from tests.
//
// Where ../shared is absent (a user's clone) tests that need it skip with a
// clear message; under CI (CI=true) its absence is a failure.
#ifndef CAIRN_TESTS_TESTING_SHARED_DATA_H_
#define CAIRN_TESTS_TESTING_SHARED_DATA_H_

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace cairn::testing {

// The shared directory: $CAIRN_SHARED_DIR if set, else <source root>/../shared.
inline std::string SharedDir() {
  if (const char* env = std::getenv("CAIRN_SHARED_DIR"); env && *env) return env;
  return std::string(CAIRN_SOURCE_DIR) + "/../shared";
}
inline std::string SharedPath(const std::string& relative) { return SharedDir() + "/" + relative; }
// A reference file: in the source tree for "tests/data/...", else under
// ../shared (SharedPath).
inline std::string TestDataPath(const std::string& relative) {
  if (relative.rfind("tests/", 0) == 0) return std::string(CAIRN_SOURCE_DIR) + "/" + relative;
  return SharedPath(relative);
}
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace cairn::testing

// Use at the top of a TEST body that reads `relative` under ../shared.
#define CAIRN_REQUIRE_SHARED(relative)                                             \
  do {                                                                             \
    const std::string cairn_shared_path_ = ::cairn::testing::SharedPath(relative); \
    if (!std::filesystem::exists(cairn_shared_path_)) {                            \
      if (::cairn::testing::InCi()) {                                              \
        FAIL() << "shared data missing under CI: " << cairn_shared_path_;          \
      }                                                                            \
      GTEST_SKIP() << "shared data not present (" << cairn_shared_path_            \
                   << "); clone the project beside ../shared to run this test";    \
    }                                                                              \
  } while (0)

#endif  // CAIRN_TESTS_TESTING_SHARED_DATA_H_
