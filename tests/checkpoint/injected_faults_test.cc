#include "checkpoint/injected_faults.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cairn::checkpoint {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

absl::StatusOr<FileInfo> Write(Env& env, const std::string& path, const std::string& text) {
  const std::span<const std::byte> parts[] = {Bytes(text)};
  return env.WriteFileAtomically(path, path + ".tmp", parts);
}

TEST(InjectedFaultsTest, RefusesMalformedSpecs) {
  for (const char* spec : {"", "ful", "failing", "failing:", "failing:2", "failing:-0.1", "failing:x", "failing:0.5:y",
                           "failing:0.5:1:2"}) {
    EXPECT_EQ(InjectedFaultsEnv(spec, Env::Default()).status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(InjectedFaultsTest, FullDiskFailsEveryWriteAndNothingElse) {
  testing::TempDir dir("cairn-injected-faults");
  ASSERT_TRUE(Write(*Env::Default(), dir.path() + "/a", "before").ok());
  auto env = InjectedFaultsEnv("full", Env::Default());
  ASSERT_TRUE(env.ok()) << env.status();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Write(**env, dir.path() + "/a", "after").status().code(), absl::StatusCode::kResourceExhausted);
  }
  auto file = (*env)->OpenForRead(dir.path() + "/a");
  ASSERT_TRUE(file.ok()) << file.status();
  std::string read(6, '\0');
  ASSERT_TRUE((*file)->Read(0, MutableBytesOf(read.data(), read.size())).ok());
  EXPECT_EQ(read, "before");  // the failed writes changed nothing
  EXPECT_TRUE((*env)->DeleteFile(dir.path() + "/a").ok());
}

TEST(InjectedFaultsTest, FailingDiskFailsAboutTheGivenFractionReproducibly) {
  testing::TempDir dir("cairn-injected-faults");
  auto outcomes = [&](const char* spec) {
    auto env = InjectedFaultsEnv(spec, Env::Default());
    EXPECT_TRUE(env.ok()) << env.status();
    std::string failed;
    for (int i = 0; i < 100; ++i) {
      auto written = Write(**env, dir.path() + "/f", "x");
      if (!written.ok()) {
        EXPECT_EQ(written.status().code(), absl::StatusCode::kInternal);
      }
      failed += written.ok() ? '.' : 'x';
    }
    return failed;
  };
  const std::string a = outcomes("failing:0.25:7");
  EXPECT_EQ(a, outcomes("failing:0.25:7"));  // seeded
  const auto failures = std::count(a.begin(), a.end(), 'x');
  EXPECT_GT(failures, 10);
  EXPECT_LT(failures, 45);
  EXPECT_EQ(outcomes("failing:0").find('x'), std::string::npos);
}

}  // namespace
}  // namespace cairn::checkpoint
