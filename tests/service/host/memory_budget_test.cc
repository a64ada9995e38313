#include "service/host/memory_budget.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace cairn::service
