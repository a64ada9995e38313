#include "checkpoint/options.h"

#include "gtest/gtest.h"

namespace cairn::checkpoint {
namespace {

TEST(CheckpointOptionsTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512u * 1024);
  EXPECT_EQ(*ParseByteSize("2G"), size_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("1.5gib"), size_t{3} << 29);
  EXPECT_EQ(*ParseByteSize("300MB"), 300000000u);
  for (const char* bad : {"", "abc", "12XB", "-5", "1e400G"}) {
    EXPECT_EQ(ParseByteSize(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CheckpointOptionsTest, AppliesFlagsAndLeavesOthers) {
  CheckpointOptions o;
  std::vector<std::string> args = {"--listen=:0",
                                   "--checkpoint-ram=64MiB",
                                   "--checkpoint-disk-dir=/x",
                                   "--checkpoint-disk-budget=1G",
                                   "--checkpoint-every=128",
                                   "--checkpoints=off",
                                   "--checkpoint-branch-min=0",
                                   "--prefill-chunk=64",
                                   "--checkpoint-tail-every=8",
                                   "--checkpoint-spaced-first=48",
                                   "positional"};
  ASSERT_TRUE(ParseCheckpointFlags(&args, &o).ok());
  EXPECT_EQ(args, (std::vector<std::string>{"--listen=:0", "positional"}));
  EXPECT_EQ(o.ram_budget_bytes, size_t{64} << 20);
  EXPECT_EQ(o.disk_dir, "/x");
  EXPECT_EQ(o.disk_budget_bytes, size_t{1} << 30);
  EXPECT_EQ(o.every_n, 128);
  EXPECT_FALSE(o.enabled);
  EXPECT_EQ(o.min_branch_preserve, 0);
  EXPECT_EQ(o.prefill_chunk, 64);
  EXPECT_EQ(o.tail_every, 8);
  EXPECT_EQ(o.policy().tail_every, 8);
  EXPECT_EQ(o.policy().spaced_first, 48);
  EXPECT_EQ(o.store().disk_budget_bytes, size_t{1} << 30);
  EXPECT_FALSE(o.policy().enabled);
}

TEST(CheckpointOptionsTest, DefaultsAreDocumentedAndDiskTierOffWithoutDir) {
  CheckpointOptions o;
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.store().disk_budget_bytes, 0u);
  std::string help = CheckpointFlagsHelp();
  EXPECT_NE(help.find("--checkpoint-ram"), std::string::npos);
  EXPECT_NE(help.find("default 2GiB"), std::string::npos);
}

TEST(CheckpointOptionsTest, RejectsBadValues) {
  for (const char* bad : {"--checkpoint-ram=0", "--checkpoint-ram=lots", "--checkpoint-every=-1", "--checkpoints=maybe",
                          "--prefill-chunk=0", "--checkpoint-disk-dir", "--checkpoint-spaced-first=-8"}) {
    CheckpointOptions o;
    auto r = ApplyCheckpointFlag(bad, &o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace cairn::checkpoint
