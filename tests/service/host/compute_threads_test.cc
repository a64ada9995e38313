#include "service/host/compute_threads.h"

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cairn::service {
namespace {

TEST(ParseCpuMaxTest, QuotaIsRoundedUpToWholeCpus) {
  EXPECT_EQ(*ParseCpuMax("150000 100000\n"), 2);
  EXPECT_EQ(*ParseCpuMax("200000 100000"), 2);
  EXPECT_EQ(*ParseCpuMax("400000 100000"), 4);
  // Less than one CPU's worth still runs one thread.
  EXPECT_EQ(*ParseCpuMax("10000 100000"), 1);
  EXPECT_EQ(*ParseCpuMax("0 100000"), 1);
}

TEST(ParseCpuMaxTest, MaxMeansNoQuota) {
  auto cpus = ParseCpuMax("max 100000\n");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_FALSE(cpus->has_value());
}

TEST(ParseCpuMaxTest, MalformedContentsAreRefused) {
  for (const char* text :
       {"", "max", "150000", "150000 0", "abc 100000", "150000 100000 7", "-5 100000", "150000 x", "1.5 100000"}) {
    SCOPED_TRACE(text);
    auto cpus = ParseCpuMax(text);
    EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument);
    if (!cpus.ok()) {
      EXPECT_NE(cpus.status().message().find("cpu.max"), std::string_view::npos);
    }
  }
}

// A cgroup tree of the test's own: the process's cgroup path (as
// /proc/self/cgroup names it) under a temporary root.
class DefaultComputeThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(root_.empty());
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    affinity_ = CPU_COUNT(&set);
  }
  void Write(const std::string& dir, const std::string& text) {
    std::filesystem::create_directories(root_ + dir);
    std::ofstream(root_ + dir + "/cpu.max") << text;
  }
  cairn::testing::TempDir temp_{"cairn-cgroup"};
  const std::string root_ = temp_.path();
  const std::string own_ = "/kubepods/pod1/cairn";
  int affinity_ = 0;
};

TEST_F(DefaultComputeThreadsTest, NoCgroupFilesMeanTheAffinityMask) {
  const ComputeThreads t = DefaultComputeThreads(root_, own_);
  EXPECT_EQ(t.threads, affinity_);
  EXPECT_NE(t.source.find("CPU affinity"), std::string::npos) << t.source;
}

TEST_F(DefaultComputeThreadsTest, AQuotaBelowTheAffinityWins) {
  Write("", "50000 100000\n");
  const ComputeThreads t = DefaultComputeThreads(root_);
  EXPECT_EQ(t.threads, 1);
  EXPECT_NE(t.source.find("cgroup CPU quota 50000 100000"), std::string::npos) << t.source;
}

TEST_F(DefaultComputeThreadsTest, AQuotaAboveTheAffinityDoesNotRaiseIt) {
  Write("", "max 100000\n");
  EXPECT_EQ(DefaultComputeThreads(root_).threads, affinity_);
  Write("", "6400000 100000\n");
  EXPECT_EQ(DefaultComputeThreads(root_).threads, affinity_);
}

TEST_F(DefaultComputeThreadsTest, TheSmallestQuotaOnThePathToTheRootWins) {
  Write("", "300000 100000\n");
  Write(own_, "100000 100000\n");
  ComputeThreads t = DefaultComputeThreads(root_, own_);
  EXPECT_EQ(t.threads, 1);
  EXPECT_NE(t.source.find(own_ + "/cpu.max"), std::string::npos) << t.source;
  // A parent's quota binds its children too.
  Write(own_, "max 100000\n");
  Write("/kubepods", "100000 100000\n");
  Write("", "max 100000\n");
  t = DefaultComputeThreads(root_, own_);
  EXPECT_EQ(t.threads, 1);
  EXPECT_NE(t.source.find(root_ + "/kubepods/cpu.max"), std::string::npos) << t.source;
}

TEST_F(DefaultComputeThreadsTest, AMalformedFileIsNamedAndSkipped) {
  Write("", "lots\n");
  const ComputeThreads t = DefaultComputeThreads(root_);
  EXPECT_EQ(t.threads, affinity_);
  EXPECT_NE(t.source.find("ignored " + root_ + "/cpu.max"), std::string::npos) << t.source;
}

}  // namespace
}  // namespace cairn::service
