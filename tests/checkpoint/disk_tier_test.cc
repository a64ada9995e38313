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
struct Tier {
  std::vector<std::string> warnings;
  std::unique_ptr<DiskTier> disk;
};

// A tier on `dir` through `env` that collects its warnings.
std::unique_ptr<Tier> MustCreate(const TempDir& dir, Env* env = Env::Default()) {
  auto tier = std::make_unique<Tier>();
  Tier* t = tier.get();
  auto disk = DiskTier::Create(env, dir.path(), [t](const std::string& m) { t->warnings.push_back(m); });
  EXPECT_TRUE(disk.ok()) << disk.status();
  if (disk.ok()) tier->disk = std::move(*disk);
  return tier;
}

// Overwrites `bytes` at `offset` of `path`, as a failing disk would.
void Overwrite(const std::string& path, std::streamoff offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(DiskTierTest, WrittenCheckpointsReadBackExactly) {
  TempDir dir;
  auto tier = MustCreate(dir);
  const Checkpoint with_logits = TestCheckpoint(12, 3000, 1, /*logits=*/true);
  const Checkpoint plain = TestCheckpoint(40, 0, 2);
  ASSERT_TRUE(tier->disk->Write(7, with_logits, 3.5).ok());
  ASSERT_TRUE(tier->disk->Write(8, plain, 1).ok());
  EXPECT_EQ(tier->disk->Path(7), dir.path() + "/ckpt-7.bin");
  EXPECT_TRUE(fs::exists(tier->disk->Path(7)));
  EXPECT_TRUE(dir.Files(".tmp").empty());
  auto got = tier->disk->Read(7, 12, with_logits.snapshot.layout);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(**got, with_logits);
  got = tier->disk->Read(8, 40, plain.snapshot.layout);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(**got, plain);
  tier->disk->Delete(8);
  EXPECT_FALSE(fs::exists(tier->disk->Path(8)));
  tier->disk->Delete(8);  // absent already: no error to report
  EXPECT_TRUE(tier->warnings.empty());
}

TEST(DiskTierTest, ReadRefusesDamagedMissingOrForeignFiles) {
  TempDir dir;
  auto tier = MustCreate(dir);
  const Checkpoint cp = TestCheckpoint(5, 2000, 3);
  const uint64_t layout = cp.snapshot.layout;
  ASSERT_TRUE(tier->disk->Write(1, cp, 1).ok());
  // Another entry's position or layout: the file is not the checkpoint asked for.
  EXPECT_EQ(tier->disk->Read(1, 6, layout).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(tier->disk->Read(1, 5, layout + 1).status().code(), absl::StatusCode::kDataLoss);
  // One payload bit flipped: the trailer hash catches it.
  Overwrite(tier->disk->Path(1), 80 + 1000, std::string(1, static_cast<char>(cp.snapshot.data[1000] ^ 0x10)));
  auto got = tier->disk->Read(1, 5, layout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("checksum mismatch"), std::string::npos) << got.status();
  // Cut short: the header's lengths no longer match the size.
  ASSERT_TRUE(tier->disk->Write(2, cp, 1).ok());
  fs::resize_file(tier->disk->Path(2), fs::file_size(tier->disk->Path(2)) - 5);
  got = tier->disk->Read(2, 5, layout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("size does not match"), std::string::npos) << got.status();
  // Gone: data loss too (the store knew it on disk).
  got = tier->disk->Read(3, 5, layout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("vanished"), std::string::npos) << got.status();
}

TEST(DiskTierTest, ScanFindsValidFilesAndDeletesDamagedOnes) {
  TempDir dir;
  auto tier = MustCreate(dir);
  const Checkpoint a = TestCheckpoint(10, 1000, 1, /*logits=*/true);
  const Checkpoint b = TestCheckpoint(20, 500, 2);
  ASSERT_TRUE(tier->disk->Write(3, a, 2.5).ok());
  ASSERT_TRUE(tier->disk->Write(4, b, 7).ok());
  ASSERT_TRUE(tier->disk->Write(5, b, 7).ok());
  Overwrite(tier->disk->Path(5), 40, "Z");  // header corrupt
  fs::copy_file(tier->disk->Path(3), dir.path() + "/ckpt-6.bin");  // named for another id
  std::ofstream(dir.path() + "/ckpt-9.tmp") << "CAIRNCK1";  // a write that never completed
  std::ofstream(dir.path() + "/notes.txt") << "not ours";
  std::ofstream(dir.path() + "/ckpt-x.bin") << "not ours either";

  auto scan = tier->disk->Scan();
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
  EXPECT_FALSE(fs::exists(tier->disk->Path(5)));
  EXPECT_FALSE(fs::exists(dir.path() + "/ckpt-6.bin"));
  EXPECT_FALSE(fs::exists(dir.path() + "/ckpt-9.tmp"));
  EXPECT_TRUE(fs::exists(dir.path() + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir.path() + "/ckpt-x.bin"));
  // Each deleted file is named once, with the reason.
  std::sort(tier->warnings.begin(), tier->warnings.end());
  ASSERT_EQ(tier->warnings.size(), 3u);
  const std::string p5 = tier->disk->Path(5), p6 = dir.path() + "/ckpt-6.bin";
  EXPECT_EQ(tier->warnings[0], "checkpoint file " + p5 + " deleted at start-up: " + p5 + ": header is corrupt");
  EXPECT_EQ(tier->warnings[1], "checkpoint file " + p6 + " deleted at start-up: its name does not match its id");
  EXPECT_EQ(tier->warnings[2], "checkpoint file " + dir.path() + "/ckpt-9.tmp deleted: a write that never completed");
}

TEST(DiskTierTest, FileSystemErrorsAreReturned) {
  TempDir dir;
  cairn::testing::FaultEnv env;
  auto tier = MustCreate(dir, &env);
  env.Fail(cairn::testing::FaultEnv::Op::kWrite, "ckpt-1", ENOSPC);
  EXPECT_EQ(tier->disk->Write(1, TestCheckpoint(1, 100, 1), 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(dir.Files(".bin").empty());
  EXPECT_TRUE(dir.Files(".tmp").empty());
  ASSERT_TRUE(tier->disk->Write(2, TestCheckpoint(1, 100, 1), 1).ok());
  env.Fail(cairn::testing::FaultEnv::Op::kRead, "ckpt-2", EIO);
  EXPECT_EQ(tier->disk->Read(2, 1, TestCheckpoint(1, 100, 1).snapshot.layout).status().code(),
            absl::StatusCode::kInternal);
  env.Fail(cairn::testing::FaultEnv::Op::kList, dir.path(), EACCES);
  EXPECT_EQ(tier->disk->Scan().status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace cairn::checkpoint
