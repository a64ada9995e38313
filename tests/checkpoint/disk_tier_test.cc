#include "checkpoint/disk_tier.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/store_testing.h"
#include "tests/testing/fault_env.h"

namespace cairn::checkpoint {
namespace {

namespace fs = std::filesystem;
using cairn::testing::FaultEnv;

// A disk tier in a fresh directory, collecting its warnings.
class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(Env::Default()); }

  void Open(Env* env) {
    auto disk = DiskTier::Create(env, dir_.path(), [this](const std::string& m) { warnings_.push_back(m); });
    ASSERT_TRUE(disk.ok()) << disk.status();
    disk_ = std::move(*disk);
  }
  // Writes `cp` as checkpoint `id` and checks that it succeeded.
  void MustWrite(CheckpointId id, const Checkpoint& cp, double cost = 1) {
    absl::Status written = disk_->Write(id, cp, cost);
    ASSERT_TRUE(written.ok()) << written;
  }
  // Overwrites `bytes` at `offset` of checkpoint `id`'s file, as a failing disk would.
  void Damage(CheckpointId id, std::streamoff offset, const std::string& bytes) {
    std::fstream f(disk_->Path(id), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  absl::StatusCode ReadCode(CheckpointId id, Pos pos, uint64_t layout) const {
    return disk_->Read(id, pos, layout).status().code();
  }

  TempDir dir_;
  std::vector<std::string> warnings_;
  std::unique_ptr<DiskTier> disk_;
};

TEST_F(DiskTierTest, WrittenCheckpointsReadBackExactly) {
  const Checkpoint with_logits = TestCheckpoint(12, 3000, 1, /*logits=*/true);
  const Checkpoint plain = TestCheckpoint(40, 0, 2);
  MustWrite(7, with_logits, 3.5);
  MustWrite(8, plain);
  EXPECT_EQ(disk_->Path(7), dir_.path() + "/ckpt-7.bin");
  EXPECT_TRUE(fs::exists(disk_->Path(7)));
  EXPECT_TRUE(dir_.Files(".tmp").empty());
  for (const auto& [id, cp] : {std::pair{7, &with_logits}, std::pair{8, &plain}}) {
    auto got = disk_->Read(id, cp->snapshot.pos, cp->snapshot.layout);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(**got, *cp);
  }
  disk_->Delete(8);
  EXPECT_FALSE(fs::exists(disk_->Path(8)));
  disk_->Delete(8);  // absent already: nothing to report
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DiskTierTest, ReadRefusesDamagedMissingOrForeignFiles) {
  const Checkpoint cp = TestCheckpoint(5, 2000, 3);
  const uint64_t layout = cp.snapshot.layout;
  MustWrite(1, cp);
  MustWrite(2, cp);
  // Another entry's position or layout: the file is not the checkpoint asked for.
  EXPECT_EQ(ReadCode(1, 6, layout), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCode(1, 5, layout + 1), absl::StatusCode::kDataLoss);
  // One payload bit flipped: the trailer hash catches it.
  Damage(1, 80 + 1000, std::string(1, static_cast<char>(cp.snapshot.data[1000] ^ 0x10)));
  // Cut short: the header's lengths no longer match the size.
  fs::resize_file(disk_->Path(2), fs::file_size(disk_->Path(2)) - 5);
  const std::pair<CheckpointId, const char*> damaged[] = {
      {1, "checksum mismatch"}, {2, "size does not match"}, {3, "vanished"}};  // 3: never written
  for (const auto& [id, reason] : damaged) {
    auto got = disk_->Read(id, 5, layout);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << id;
    EXPECT_NE(got.status().message().find(reason), std::string::npos) << got.status();
  }
}

TEST_F(DiskTierTest, ScanFindsValidFilesAndDeletesDamagedOnes) {
  const Checkpoint a = TestCheckpoint(10, 1000, 1, /*logits=*/true);
  const Checkpoint b = TestCheckpoint(20, 500, 2);
  MustWrite(3, a, 2.5);
  for (CheckpointId id : {4, 5}) MustWrite(id, b, 7);
  Damage(5, 40, "Z");  // header corrupt
  const std::string renamed = dir_.path() + "/ckpt-6.bin", torn = dir_.path() + "/ckpt-9.tmp";
  fs::copy_file(disk_->Path(3), renamed);  // named for another id
  std::ofstream(torn) << "CAIRNCK1";       // a write that never completed
  std::ofstream(dir_.path() + "/notes.txt") << "not ours";
  std::ofstream(dir_.path() + "/ckpt-x.bin") << "not ours either";

  auto scan = disk_->Scan();
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_EQ(scan->found.size(), 2u);
  std::sort(scan->found.begin(), scan->found.end(),
            [](const DiskTier::Found& x, const DiskTier::Found& y) { return x.id < y.id; });
  const DiskTier::Found& fa = scan->found[0];
  EXPECT_EQ(fa.id, 3u);
  EXPECT_EQ(fa.pos, 10);
  EXPECT_EQ(fa.scope, a.snapshot.scope);
  EXPECT_EQ(fa.layout, a.snapshot.layout);
  EXPECT_EQ(fa.bytes, a.bytes());
  EXPECT_EQ(fa.cost, 2.5);
  EXPECT_EQ(fa.tag, a.tag);
  EXPECT_EQ(scan->found[1].id, 4u);
  EXPECT_EQ(scan->found[1].bytes, b.bytes());
  EXPECT_EQ(scan->corrupt, 2u);
  for (const std::string& gone : {disk_->Path(5), renamed, torn}) EXPECT_FALSE(fs::exists(gone)) << gone;
  EXPECT_TRUE(fs::exists(dir_.path() + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir_.path() + "/ckpt-x.bin"));
  // Each deleted file is named once, with the reason.
  std::sort(warnings_.begin(), warnings_.end());
  ASSERT_EQ(warnings_.size(), 3u);
  const std::string p5 = disk_->Path(5);
  EXPECT_EQ(warnings_[0], "checkpoint file " + p5 + " deleted at start-up: " + p5 + ": header is corrupt");
  EXPECT_EQ(warnings_[1], "checkpoint file " + renamed + " deleted at start-up: its name does not match its id");
  EXPECT_EQ(warnings_[2], "checkpoint file " + torn + " deleted: a write that never completed");
}

TEST_F(DiskTierTest, FileSystemErrorsAreReturned) {
  FaultEnv env;
  Open(&env);
  const Checkpoint cp = TestCheckpoint(1, 100, 1);
  env.Fail(FaultEnv::Op::kWrite, "ckpt-1", ENOSPC);
  EXPECT_EQ(disk_->Write(1, cp, 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(dir_.Files(".bin").empty());
  EXPECT_TRUE(dir_.Files(".tmp").empty());
  MustWrite(2, cp);
  env.Fail(FaultEnv::Op::kRead, "ckpt-2", EIO);
  EXPECT_EQ(ReadCode(2, 1, cp.snapshot.layout), absl::StatusCode::kInternal);
  env.Fail(FaultEnv::Op::kList, dir_.path(), EACCES);
  EXPECT_EQ(disk_->Scan().status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace cairn::checkpoint
