#include "checkpoint/store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "tests/checkpoint/recording_retention.h"
#include "tests/checkpoint/store_testing.h"
#include "tests/testing/fault_env.h"

namespace cairn::checkpoint {
namespace {

namespace fs = std::filesystem;

StoreOptions Opts(size_t ram, std::string dir, size_t disk) {
  StoreOptions o;
  o.ram_budget_bytes = ram;
  o.disk_dir = std::move(dir);
  o.disk_budget_bytes = disk;
  return o;
}

std::unique_ptr<CheckpointStore> MustCreate(const StoreOptions& o) {
  auto s = CheckpointStore::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Collects the store's warnings (StoreOptions::on_warning).
struct Warnings {
  std::mutex mu;
  std::vector<std::string> lines;
  void Attach(StoreOptions& o) {
    o.on_warning = [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(m);
    };
  }
  // How many warnings name `file`.
  int Naming(const std::string& file) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const std::string& l : lines) n += l.find(file) != std::string::npos;
    return n;
  }
};

std::string FileOf(const TempDir& dir, CheckpointId id) { return dir.path() + "/ckpt-" + std::to_string(id) + ".bin"; }

TEST(CheckpointStoreTest, PutGetRoundTripAndAccounting) {
  auto store = MustCreate(Opts(1 << 20, "", 0));
  Checkpoint a = TestCheckpoint(12, 1000, 1, true);
  const size_t bytes = a.bytes();
  auto id = store->Put(TestCheckpoint(12, 1000, 1, true), 12);
  ASSERT_TRUE(id.ok());
  auto got = store->Get(*id);
  ASSERT_TRUE(got.ok());
  ExpectSame(**got, a);
  EXPECT_EQ(store->stats().ram_bytes, bytes);
  auto info = store->Info(*id);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->pos, 12);
  EXPECT_TRUE(info->in_ram);
  EXPECT_FALSE(info->on_disk);
  store->Erase(*id);
  EXPECT_EQ(store->stats().ram_bytes, 0u);
  EXPECT_EQ(store->Get(*id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Get(12345).status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointStoreTest, RejectsBadOptionsAndOversizedCheckpoints) {
  EXPECT_EQ(CheckpointStore::Create(Opts(0, "", 0)).status().code(), absl::StatusCode::kInvalidArgument);
  auto store = MustCreate(Opts(4096, "", 0));
  EXPECT_EQ(store->Put(TestCheckpoint(1, 5000, 1), 1).status().code(), absl::StatusCode::kResourceExhausted);
}

PutInfo OnPath(uint64_t path_key, CaptureReason reason = CaptureReason::kMessageBoundary) {
  PutInfo info;
  info.cost = 100;
  info.reason = reason;
  info.path_key = path_key;
  return info;
}

TEST(CheckpointStoreTest, RemembersWhatItPushesOutOrRefusesAndReportsMisses) {
  auto policy = std::make_shared<RecordingRetention>();
  StoreOptions o = Opts(2500, "", 0);
  o.retention = policy;
  auto store = MustCreate(o);
  EXPECT_FALSE(store->RemembersMissed());
  store->BeginRequest();
  ASSERT_TRUE(store->Put(TestCheckpoint(10, 1000, 1), OnPath(11)).ok());  // full scope (odd seed)
  ASSERT_TRUE(store->Put(TestCheckpoint(20, 1000, 2), OnPath(12)).ok());  // checkpoint scope
  ASSERT_TRUE(store->Put(TestCheckpoint(30, 1000, 3), OnPath(13)).ok());  // pushes 11 out
  EXPECT_FALSE(store->Put(TestCheckpoint(40, 1000, 4), OnPath(14, CaptureReason::kTail)).ok());
  EXPECT_FALSE(store->WouldAdmit(1000, SnapshotScope::kFull, 50, OnPath(15, CaptureReason::kTail)));
  ASSERT_TRUE(store->Put(TestCheckpoint(60, 1000, 5), OnPath(0)).ok());  // pushes 12 out; no path: 13 stays known
  ASSERT_EQ(policy->Of(RetentionEvent::kRemoved).size(), 2u);
  for (const auto& r : policy->Of(RetentionEvent::kRemoved)) EXPECT_TRUE(r.remembered);
  ASSERT_EQ(policy->Of(RetentionEvent::kRefused).size(), 2u);
  EXPECT_TRUE(store->RemembersMissed());

  // Deepest first: the first remembered one that could serve is the miss.
  store->BeginRequest();
  const uint64_t path[] = {99, 15, 11};
  store->NoteMissed(path, 0);
  ASSERT_EQ(policy->Of(RetentionEvent::kMissed).size(), 1u);
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed)[0].path_key, 15u);
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed)[0].request, 2u);
  store->NoteMissed(std::span<const uint64_t>(path, 2), 0);  // 15 is forgotten once missed
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed).size(), 1u);
  // Where only a full snapshot could serve, a checkpoint scope one (12) is
  // no miss; the full one below it (11) is.
  const uint64_t deeper[] = {12, 11};
  store->NoteMissed(deeper, 1);
  ASSERT_EQ(policy->Of(RetentionEvent::kMissed).size(), 2u);
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed)[1].path_key, 11u);
  store->NoteMissed(deeper, 0);
  ASSERT_EQ(policy->Of(RetentionEvent::kMissed).size(), 3u);
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed)[2].path_key, 12u);

  // A new checkpoint on a remembered path ends its memory without a verdict;
  // what no prompt missed is forgotten after kMissHorizon prompts, as unused
  // until then.
  ASSERT_TRUE(store->Put(TestCheckpoint(40, 100, 6), OnPath(14)).ok());  // fits: nothing pushed out
  for (uint64_t i = 0; i < CheckpointStore::kMissHorizon; ++i) store->BeginRequest();
  EXPECT_FALSE(store->RemembersMissed());
  EXPECT_TRUE(policy->Of(RetentionEvent::kForgotten).empty());
  ASSERT_TRUE(store->Put(TestCheckpoint(70, 1000, 7), OnPath(17, CaptureReason::kTail)).status().code() ==
              absl::StatusCode::kResourceExhausted);
  for (uint64_t i = 0; i < CheckpointStore::kMissHorizon; ++i) store->BeginRequest();
  ASSERT_EQ(policy->Of(RetentionEvent::kForgotten).size(), 1u);
  EXPECT_EQ(policy->Of(RetentionEvent::kForgotten)[0].path_key, 17u);
  EXPECT_EQ(policy->Of(RetentionEvent::kForgotten)[0].request, 2 + 2 * CheckpointStore::kMissHorizon);
  EXPECT_FALSE(store->RemembersMissed());
}

TEST(CheckpointStoreTest, RemembersNothingForAPolicyThatDoesNotAsk) {
  auto policy = std::make_shared<RecordingRetention>();
  policy->wants_misses_ = false;
  StoreOptions o = Opts(2000, "", 0);
  o.retention = policy;
  auto store = MustCreate(o);
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(store->Put(TestCheckpoint(10, 1000, k), OnPath(k)).ok());
  EXPECT_FALSE(store->Put(TestCheckpoint(40, 1000, 9), OnPath(9, CaptureReason::kTail)).ok());
  EXPECT_FALSE(store->RemembersMissed());
  for (const auto& r : policy->Of(RetentionEvent::kRemoved)) EXPECT_FALSE(r.remembered);
  const uint64_t path[] = {9, 1};
  store->NoteMissed(path, 0);
  EXPECT_TRUE(policy->Of(RetentionEvent::kMissed).empty());
}

TEST(CheckpointStoreTest, StaysWithinByteBudgetNotCount) {
  const size_t budget = 20000;
  auto store = MustCreate(Opts(budget, "", 0));
  std::vector<CheckpointId> dropped;
  store->AddDropListener([&](CheckpointId id) { dropped.push_back(id); });
  // Many small ones fit where few big ones do not.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(store->Put(TestCheckpoint(i + 1, 400, i), 100).ok());
  EXPECT_EQ(store->stats().ram_entries, 30u);
  EXPECT_TRUE(dropped.empty());
  for (int i = 0; i < 5; ++i) {
    // Worth their bytes: admitted, pushing small ones out.
    ASSERT_TRUE(store->Put(TestCheckpoint(1000 + i, 6000, 100 + i), 1e5).ok());
    EXPECT_LE(store->stats().ram_bytes, budget);
  }
  EXPECT_FALSE(dropped.empty());
  for (CheckpointId id : dropped) EXPECT_FALSE(store->Contains(id));
  EXPECT_EQ(store->stats().dropped, dropped.size());
  EXPECT_LE(store->stats().peak_ram_bytes, budget + 6000 + 512);
}

TEST(CheckpointStoreTest, EvictsLowestValuePerByteFirst) {
  auto store = MustCreate(Opts(10000, "", 0));
  // Same size, different recompute cost: the cheap-to-recompute ones go.
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*store->Put(TestCheckpoint(10, 2000, i), (i % 2) ? 1000 : 10));
  ASSERT_TRUE(store->Put(TestCheckpoint(10, 2000, 9), 500).ok());  // forces one eviction
  EXPECT_FALSE(store->Contains(ids[0]));
  EXPECT_TRUE(store->Contains(ids[1]));
  EXPECT_TRUE(store->Contains(ids[3]));
  // Per byte: a big checkpoint saving the same work is worth less than a small one.
  auto store2 = MustCreate(Opts(10000, "", 0));
  CheckpointId big = *store2->Put(TestCheckpoint(10, 5000, 1), 100);
  CheckpointId small = *store2->Put(TestCheckpoint(10, 1000, 2), 100);
  ASSERT_TRUE(store2->Put(TestCheckpoint(10, 4000, 3), 1e6).ok());
  EXPECT_FALSE(store2->Contains(big));
  EXPECT_TRUE(store2->Contains(small));
}

TEST(CheckpointStoreTest, RecencyBreaksEqualValue) {
  auto store = MustCreate(Opts(10000, "", 0));
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*store->Put(TestCheckpoint(10, 2000, i), 100));
  // Touch the oldest ones: now ids[2] is the least recently used.
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(store->Get(ids[0]).ok());
    ASSERT_TRUE(store->Get(ids[1]).ok());
    ASSERT_TRUE(store->Get(ids[3]).ok());
  }
  ASSERT_TRUE(store->Put(TestCheckpoint(10, 2000, 7), 100).ok());
  EXPECT_FALSE(store->Contains(ids[2]));
  EXPECT_TRUE(store->Contains(ids[0]));
  EXPECT_TRUE(store->Contains(ids[1]));
  EXPECT_TRUE(store->Contains(ids[3]));
}

TEST(CheckpointStoreTest, SpillsToDiskAndReadsBack) {
  TempDir dir;
  auto store = MustCreate(Opts(10000, dir.path(), 1 << 20));
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(*store->Put(TestCheckpoint(i + 1, 3000, i, i % 3 == 0), 50 + i));
  StoreStats s = store->stats();
  EXPECT_LE(s.ram_bytes, 10000u);
  EXPECT_GT(s.spills, 0u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(dir.Files(".bin").size(), s.disk_entries);
  EXPECT_TRUE(dir.Files(".tmp").empty());
  for (int i = 0; i < 12; ++i) {
    auto got = store->Get(ids[i]);
    ASSERT_TRUE(got.ok()) << i << " " << got.status();
    ExpectSame(**got, TestCheckpoint(i + 1, 3000, i, i % 3 == 0));
    EXPECT_LE(store->stats().ram_bytes, 10000u);
  }
  EXPECT_GT(store->stats().disk_reads, 0u);
}

TEST(CheckpointStoreTest, DiskBudgetDropsAndNotifies) {
  TempDir dir;
  auto store = MustCreate(Opts(7000, dir.path(), 7000));
  std::set<CheckpointId> dropped;
  store->AddDropListener([&](CheckpointId id) { dropped.insert(id); });
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(*store->Put(TestCheckpoint(i + 1, 3000, i), 10));
  StoreStats s = store->stats();
  EXPECT_LE(s.disk_bytes, 7000u);
  EXPECT_EQ(s.dropped, dropped.size());
  EXPECT_GE(dropped.size(), 5u);
  for (CheckpointId id : ids) EXPECT_EQ(store->Contains(id), !dropped.count(id));
  EXPECT_EQ(dir.Files(".bin").size(), s.disk_entries);
}

TEST(CheckpointStoreTest, AdoptsValidFilesAfterRestart) {
  TempDir dir;
  StoreOptions o = Opts(5000, dir.path(), 1 << 20);
  std::vector<CheckpointId> spilled;
  {
    auto store = MustCreate(o);
    for (int i = 0; i < 6; ++i) store->Put(TestCheckpoint(i + 1, 2000, i), 10).IgnoreError();
    for (const auto& info : store->List()) {
      if (info.on_disk) spilled.push_back(info.id);
    }
  }
  ASSERT_FALSE(spilled.empty());
  auto store = MustCreate(o);
  EXPECT_EQ(store->stats().recovered, spilled.size());
  for (CheckpointId id : spilled) {
    auto info = store->Info(id);
    ASSERT_TRUE(info);
    auto got = store->Get(id);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(info->tag, (*got)->tag);
    ExpectSame(**got, TestCheckpoint((*got)->snapshot.pos, 2000, (*got)->snapshot.pos - 1));
  }
  // New ids never reuse adopted ones.
  auto fresh = store->Put(TestCheckpoint(99, 100, 99), 1);
  ASSERT_TRUE(fresh.ok());
  for (CheckpointId id : spilled) EXPECT_NE(*fresh, id);
}

// Persist (a clean shutdown) writes what is only in RAM, most valuable
// first within the disk budget, keeps it in RAM, and a restart adopts it.
TEST(CheckpointStoreTest, PersistWritesRamCheckpointsForTheNextStart) {
  TempDir dir;
  // Room on disk for two of the three 2000-byte checkpoints.
  StoreOptions o = Opts(1 << 20, dir.path(), 2 * (2000 + 512));
  std::vector<CheckpointId> ids;
  {
    auto store = MustCreate(o);
    for (int i = 0; i < 3; ++i) ids.push_back(*store->Put(TestCheckpoint(i + 1, 2000, i), 10.0 * (i + 1)));
    EXPECT_EQ(store->stats().disk_entries + store->stats().spills, 0u);
    auto written = store->Persist();
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*written, 2u);
    EXPECT_LE(store->stats().disk_bytes, o.disk_budget_bytes);
    // The two most valuable (highest cost per byte) went to disk; all stay in RAM.
    EXPECT_FALSE(store->Info(ids[0])->on_disk);
    EXPECT_TRUE(store->Info(ids[1])->on_disk);
    EXPECT_TRUE(store->Info(ids[2])->on_disk);
    for (CheckpointId id : ids) EXPECT_TRUE(store->Info(id)->in_ram);
    auto again = store->Persist();  // nothing left that fits
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, 0u);
  }
  auto store = MustCreate(o);
  EXPECT_EQ(store->stats().recovered, 2u);
  EXPECT_FALSE(store->Contains(ids[0]));
  for (int i : {1, 2}) {
    auto got = store->Get(ids[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(**got, TestCheckpoint(i + 1, 2000, i));
  }
  auto no_disk = MustCreate(Opts(1 << 20, "", 0));
  EXPECT_EQ(no_disk->Persist().status().code(), absl::StatusCode::kFailedPrecondition);
}

// Checkpoints taken inside a reply serve at most the next turn: evicted from
// RAM they are dropped, not written to the disk tier, and Persist skips them;
// Persist stops at its deadline.
TEST(CheckpointStoreTest, ReplyCheckpointsAreNotSpilledAndPersistIsBounded) {
  TempDir dir;
  auto store = MustCreate(Opts(10000, dir.path(), 1 << 20));
  PutInfo reply;
  reply.reason = CaptureReason::kDuringGeneration;
  for (int i = 0; i < 12; ++i) {
    reply.cost = 50 + i;
    ASSERT_TRUE(store->Put(TestCheckpoint(i + 1, 3000, i), reply).ok());
  }
  StoreStats s = store->stats();
  EXPECT_LE(s.ram_bytes, 10000u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.spills, 0u);
  EXPECT_EQ(s.dropped, s.evictions);
  EXPECT_TRUE(dir.Files(".bin").empty());
  auto skipped = store->Persist();
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, 0u);

  ASSERT_TRUE(store->Put(TestCheckpoint(40, 3000, 1), 100).ok());
  auto late = store->Persist(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(dir.Files(".bin").empty());
  auto in_time = store->Persist();
  ASSERT_TRUE(in_time.ok()) << in_time.status();
  EXPECT_EQ(*in_time, 1u);
  EXPECT_EQ(dir.Files(".bin").size(), 1u);
}

// The writer is killed in the middle of writing a file: the torn write is
// never adopted nor restored, and the complete files still are.
TEST(CheckpointStoreTest, WriterKilledMidwayIsNeverRestored) {
  TempDir dir;
  StoreOptions o = Opts(5000, dir.path(), 1 << 20);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = CheckpointStore::Create(o);
    if (!store.ok()) ::_exit(3);
    int files = 0;
    store_testing::SetWriteHook([&files](size_t written, size_t total) {
      // The third spilled file dies halfway through its payload.
      if (files == 2 && written * 2 >= total) ::kill(::getpid(), SIGKILL);
      if (written == total) ++files;
    });
    for (int i = 0; i < 20; ++i) (*store)->Put(TestCheckpoint(i + 1, 3000, i), 10).IgnoreError();
    ::_exit(4);  // not reached: killed during the third spill
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(dir.Files(".tmp").size(), 1u);  // the torn write
  EXPECT_EQ(dir.Files(".bin").size(), 2u);

  auto store = MustCreate(o);
  EXPECT_EQ(store->stats().recovered, 2u);
  EXPECT_TRUE(dir.Files(".tmp").empty());
  for (const CheckpointInfo& info : store->List()) {
    auto got = store->Get(info.id);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(**got, TestCheckpoint(info.pos, 3000, info.pos - 1));
  }
}

// A test hook that flips bytes is not needed: the file is corrupted on disk
// the way a failing disk would, then read back.
TEST(CheckpointStoreTest, CorruptFileIsDetectedAndDropped) {
  TempDir dir;
  StoreOptions o = Opts(5000, dir.path(), 1 << 20);
  auto store = MustCreate(o);
  std::set<CheckpointId> dropped;
  store->AddDropListener([&](CheckpointId id) { dropped.insert(id); });
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*store->Put(TestCheckpoint(i + 1, 2000, i), 10));
  std::vector<CheckpointId> on_disk;
  for (CheckpointId id : ids) {
    if (!store->Info(id)->in_ram) on_disk.push_back(id);
  }
  ASSERT_GE(on_disk.size(), 3u);
  auto path = [&](CheckpointId id) { return dir.path() + "/ckpt-" + std::to_string(id) + ".bin"; };
  {  // One payload bit flipped.
    std::fstream f(path(on_disk[0]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(80 + 1000);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(80 + 1000);
    f.write(&c, 1);
  }
  fs::resize_file(path(on_disk[1]), fs::file_size(path(on_disk[1])) - 5);  // cut short
  {                                                                        // Header field changed (position).
    std::fstream f(path(on_disk[2]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);
    int32_t bogus = 777;
    f.write(reinterpret_cast<char*>(&bogus), 4);
  }
  for (int k = 0; k < 3; ++k) {
    auto got = store->Get(on_disk[k]);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << k;
    EXPECT_TRUE(dropped.count(on_disk[k])) << k;
    EXPECT_FALSE(fs::exists(path(on_disk[k])));
    EXPECT_EQ(store->Get(on_disk[k]).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(store->stats().corrupt, 3u);
  // The others still read back intact.
  for (size_t k = 3; k < on_disk.size(); ++k) {
    auto got = store->Get(on_disk[k]);
    ASSERT_TRUE(got.ok());
  }
}

TEST(CheckpointStoreTest, CorruptFileIsDroppedAtRestart) {
  TempDir dir;
  StoreOptions o = Opts(5000, dir.path(), 1 << 20);
  std::vector<CheckpointId> on_disk;
  {
    auto store = MustCreate(o);
    for (int i = 0; i < 6; ++i) store->Put(TestCheckpoint(i + 1, 2000, i), 10).IgnoreError();
    for (const auto& info : store->List()) {
      if (info.on_disk) on_disk.push_back(info.id);
    }
  }
  ASSERT_GE(on_disk.size(), 2u);
  const std::string p0 = dir.path() + "/ckpt-" + std::to_string(on_disk[0]) + ".bin";
  const std::string p1 = dir.path() + "/ckpt-" + std::to_string(on_disk[1]) + ".bin";
  {  // header corruption: caught at adoption
    std::fstream f(p0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    char c = 0x5a;
    f.write(&c, 1);
  }
  {  // payload corruption: adopted (header fine), caught at read-back
    std::fstream f(p1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c = 0x5a;
    f.write(&c, 1);
  }
  // A leftover temporary file (a write that never completed).
  const std::string torn = dir.path() + "/ckpt-999.tmp";
  std::ofstream(torn) << "CAIRNCK1";
  Warnings warnings;
  warnings.Attach(o);
  auto store = MustCreate(o);
  EXPECT_FALSE(store->Contains(on_disk[0]));
  EXPECT_FALSE(fs::exists(p0));
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_EQ(warnings.Naming(p0), 1);  // each dropped file is named, with the reason
  EXPECT_EQ(warnings.Naming(p0 + " deleted at start-up: " + p0 + ": header is corrupt"), 1);
  EXPECT_EQ(warnings.Naming(torn + " deleted: a write that never completed"), 1);
  EXPECT_EQ(warnings.Naming(p1), 0);
  EXPECT_EQ(store->Get(on_disk[1]).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(warnings.Naming(p1 + " dropped: checkpoint file checksum mismatch"), 1);
  EXPECT_FALSE(store->Contains(on_disk[1]));
  EXPECT_EQ(store->stats().corrupt, 2u);
  EXPECT_EQ(warnings.lines.size(), 3u);
}

TEST(CheckpointStoreTest, ConcurrentUseKeepsInvariants) {
  TempDir dir;
  auto store = MustCreate(Opts(60000, dir.path(), 120000));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<CheckpointId, uint32_t>> mine;
      for (int i = 0; i < 150; ++i) {
        uint32_t seed = t * 1000 + i;
        auto id = store->Put(TestCheckpoint(seed % 500 + 1, 1000 + rng() % 3000, seed), 1 + rng() % 100);
        if (!id.ok()) {
          // Not admitted (worth less than what it would push out) is fine.
          if (id.status().code() != absl::StatusCode::kResourceExhausted) ++bad;
          continue;
        }
        mine.push_back({*id, seed});
        auto [pick, pseed] = mine[rng() % mine.size()];
        auto got = store->Get(pick);
        if (got.ok()) {
          if ((*got)->tag != "tag-" + std::to_string(pseed)) ++bad;
        } else if (got.status().code() != absl::StatusCode::kNotFound) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  StoreStats s = store->stats();
  EXPECT_EQ(s.puts + s.rejected, 4u * 150);
  EXPECT_LE(s.ram_bytes, 60000u);
  EXPECT_LE(s.disk_bytes, 120000u);
  EXPECT_EQ(dir.Files(".bin").size(), s.disk_entries);
}

// A store over a disk tier whose file system is a FaultEnv, its warnings
// collected.
struct FaultyStore {
  TempDir dir;
  testing::FaultEnv env;
  Warnings warnings;
  StoreOptions Options() {
    StoreOptions o = Opts(5000, dir.path(), 1 << 20);
    o.env = &env;
    warnings.Attach(o);
    return o;
  }
};

// A spill that fails (disk full) loses that checkpoint only: it is dropped
// with its listeners told and a warning naming its file; the store's
// accounting matches the files and every other checkpoint reads back.
TEST(CheckpointStoreTest, FailedSpillLosesOnlyThatCheckpoint) {
  FaultyStore f;
  auto& [dir, env, warnings] = f;
  env.Fail(testing::FaultEnv::Op::kWrite, "/ckpt-2.", ENOSPC);
  auto store = MustCreate(f.Options());
  std::set<CheckpointId> dropped;
  store->AddDropListener([&](CheckpointId id) { dropped.insert(id); });
  std::vector<CheckpointId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*store->Put(TestCheckpoint(i + 1, 2000, i), 10));
  ASSERT_EQ(ids[1], 2u);
  ASSERT_EQ(env.failures(), 1);  // the oldest go first: checkpoint 2 was spilled
  EXPECT_EQ(dropped, std::set<CheckpointId>{2});
  EXPECT_FALSE(store->Contains(2));
  EXPECT_EQ(store->Get(2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(warnings.Naming(FileOf(dir, 2)), 1);
  EXPECT_FALSE(fs::exists(FileOf(dir, 2)));
  EXPECT_TRUE(dir.Files(".tmp").empty());
  StoreStats s = store->stats();
  EXPECT_EQ(dir.Files(".bin").size(), s.disk_entries);
  EXPECT_EQ(s.dropped, 1u);
  for (int i = 0; i < 6; ++i) {
    if (ids[i] == 2) continue;
    auto got = store->Get(ids[i]);
    ASSERT_TRUE(got.ok()) << i << " " << got.status();
    ExpectSame(**got, TestCheckpoint(i + 1, 2000, i));
  }
  EXPECT_GT(store->stats().spills, 0u);
  EXPECT_LE(store->stats().ram_bytes, 5000u);
}

// A read error (EIO) on a spilled checkpoint is DATA_LOSS for that one (its
// caller recomputes), never a wrong checkpoint; a warning names the file and
// the others still read back.
TEST(CheckpointStoreTest, FailedReadOfSpilledCheckpointIsDataLoss) {
  FaultyStore f;
  auto& [dir, env, warnings] = f;
  auto store = MustCreate(f.Options());
  std::vector<CheckpointId> on_disk;
  for (int i = 0; i < 6; ++i) store->Put(TestCheckpoint(i + 1, 2000, i), 10).IgnoreError();
  for (const CheckpointInfo& info : store->List()) {
    if (!info.in_ram) on_disk.push_back(info.id);
  }
  ASSERT_GE(on_disk.size(), 2u);
  env.Fail(testing::FaultEnv::Op::kRead, "/ckpt-" + std::to_string(on_disk[0]) + ".", EIO);
  auto got = store->Get(on_disk[0]);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_EQ(env.failures(), 1);
  EXPECT_EQ(warnings.Naming(FileOf(dir, on_disk[0])), 1);
  EXPECT_FALSE(store->Contains(on_disk[0]));
  for (size_t k = 1; k < on_disk.size(); ++k) {
    auto other = store->Get(on_disk[k]);
    ASSERT_TRUE(other.ok()) << other.status();
    ExpectSame(**other, TestCheckpoint((*other)->snapshot.pos, 2000, (*other)->snapshot.pos - 1));
  }
  EXPECT_EQ(dir.Files(".bin").size(), store->stats().disk_entries);
}

// A disk directory that cannot be listed at start-up is an error of Create
// (the store does not start over a tier it cannot see).
TEST(CheckpointStoreTest, UnlistableDiskDirectoryFailsCreate) {
  FaultyStore f;
  f.env.Fail(testing::FaultEnv::Op::kList, f.dir.path(), EIO);
  auto store = CheckpointStore::Create(f.Options());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInternal) << store.status();
  EXPECT_NE(store.status().message().find(f.dir.path()), std::string::npos);
}

}  // namespace
}  // namespace cairn::checkpoint
