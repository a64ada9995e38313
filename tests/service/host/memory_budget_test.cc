#include "service/host/memory_budget.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cairn::service {
namespace {

TEST(MemoryBudgetTest, ReservationsAreCountedAndBounded) {
  MemoryBudget budget(1000);
  auto a = budget.Reserve(600, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget.in_use(), 600u);
  auto b = budget.Reserve(500, "b of 5 positions");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "memory budget exceeded: b of 5 positions needs 500 bytes of sequence memory; 600 bytes are in "
            "use by live sequences (0 of them by this one); the budget is 1000 bytes (--memory-budget)");
  EXPECT_EQ(budget.in_use(), 600u);
  // Refused because others hold memory: a wait may cure it. Beyond the
  // whole budget: none can, and the refusal says so.
  EXPECT_FALSE(ExceedsWholeBudget(b.status()));
  auto huge = budget.Reserve(1001, "huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ExceedsWholeBudget(huge.status()));
  EXPECT_FALSE(ExceedsWholeBudget(absl::ResourceExhaustedError("other")));
  // Growing counts only the difference; a refused growth changes nothing.
  EXPECT_TRUE(a->Grow(1000, "a").ok());
  EXPECT_EQ(budget.in_use(), 1000u);
  absl::Status st = a->Grow(1001, "a again");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(st.message()).find("(1000 of them by this one)"), std::string::npos) << st;
  EXPECT_EQ(a->bytes(), 1000u);
  EXPECT_TRUE(a->Grow(10, "smaller").ok());  // never shrinks
  EXPECT_EQ(a->bytes(), 1000u);
  // Set is unchecked accounting; moves transfer; destruction releases.
  a->Set(200);
  EXPECT_EQ(budget.in_use(), 200u);
  MemoryReservation moved = std::move(*a);
  EXPECT_EQ(a->bytes(), 0u);
  EXPECT_EQ(budget.in_use(), 200u);
  {
    auto c = budget.Reserve(800, "c");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(budget.in_use(), 1000u);
  }
  EXPECT_EQ(budget.in_use(), 200u);
  moved.Reset();
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_EQ(budget.Reserve(1001, "too big alone").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MemoryBudgetTest, ZeroIsUnlimitedButCounted) {
  MemoryBudget budget(0);
  auto a = budget.Reserve(SIZE_MAX / 2, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->Grow(SIZE_MAX / 2 + 7, "a").ok());
  EXPECT_EQ(budget.in_use(), SIZE_MAX / 2 + 7);
}

TEST(MemoryBudgetTest, ParsesSizesAndPercentages) {
  EXPECT_EQ(*ParseMemoryBudget("0"), 0u);
  EXPECT_EQ(*ParseMemoryBudget("64KiB"), 65536u);
  EXPECT_EQ(*ParseMemoryBudget("2GiB"), size_t{2} << 30);
  const size_t ram = AvailableRamBytes();
  ASSERT_GT(ram, 0u);  // Linux: sysconf
  EXPECT_EQ(*ParseMemoryBudget("100%"), ram);
  EXPECT_NEAR(static_cast<double>(*ParseMemoryBudget("50%")), ram / 2.0, 1.0);
  EXPECT_EQ(*ParseMemoryBudget("0%"), 0u);
  for (const char* bad : {"", "%", "101%", "-1%", "x%", "lots", "-5"}) {
    EXPECT_EQ(ParseMemoryBudget(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// The RAM limit of a container is the lowest memory.max on the path from
// the process's cgroup to the root (Kubernetes sets it on the pod, above
// the container's own cgroup); an unlimited "max" is no limit.
TEST(MemoryBudgetTest, TheLowestCgroupMemoryLimitOnThePathToTheRootBinds) {
  cairn::testing::TempDir temp("cairn-memcg");
  ASSERT_FALSE(temp.path().empty());
  const std::string root = temp.path();
  const std::string own = "/kubepods/pod1/cairn";
  const auto write = [&](const std::string& dir, const std::string& file, const std::string& text) {
    std::filesystem::create_directories(root + dir);
    std::ofstream(root + dir + "/" + file) << text;
  };
  const size_t physical = AvailableRamBytes(root, own);  // no files: sysconf
  ASSERT_GT(physical, size_t{3} << 20);
  write(own, "memory.max", "max\n");
  write("/kubepods/pod1", "memory.max", std::to_string(physical / 2) + "\n");
  write("/kubepods", "memory.max", std::to_string(physical - 1) + "\n");
  EXPECT_EQ(AvailableRamBytes(root, own), physical / 2);
  write(own, "memory.max", std::to_string(physical / 3) + "\n");
  EXPECT_EQ(AvailableRamBytes(root, own), physical / 3);
  // cgroup v1's single limit file.
  write("/memory", "memory.limit_in_bytes", std::to_string(1 << 20) + "\n");
  EXPECT_EQ(AvailableRamBytes(root, own), size_t{1} << 20);
  // A limit above the RAM does not raise it; garbage is ignored.
  std::filesystem::remove_all(root + "/memory");
  write(own, "memory.max", "lots\n");
  write("/kubepods/pod1", "memory.max", std::to_string(physical) + "0\n");
  write("/kubepods", "memory.max", "max\n");
  EXPECT_EQ(AvailableRamBytes(root, own), physical);
  // --memory-budget=N% takes the server's own cgroup under --cgroup-root: a
  // limit at the root binds every cgroup.
  write("", "memory.max", std::to_string(physical / 2) + "\n");
  EXPECT_EQ(*ParseMemoryBudget("50%", root), physical / 4);
}

}  // namespace
}  // namespace cairn::service
