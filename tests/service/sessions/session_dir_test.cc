#include "service/sessions/session_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fault_env.h"

namespace cairn::service {
namespace {

namespace fs = std::filesystem;

class SessionDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cairn-session-dir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static PersistedSession Sample(int tokens) {
    PersistedSession s;
    s.owner = "owner-a";
    s.cache_tenant = "tenant-a";
    s.snapshot.set_version(1);
    s.snapshot.set_model("demo");
    for (int i = 0; i < tokens; ++i) s.snapshot.add_history()->set_token(300 + i);
    s.snapshot.set_state(std::string(1000, '\x5a'));
    s.snapshot.set_pos(tokens);
    return s;
  }
  std::unique_ptr<SessionDirectory> Open(std::chrono::seconds expiry = std::chrono::seconds(3600)) {
    auto d = SessionDirectory::Create(dir_, expiry);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }
  std::string dir_;
};

TEST_F(SessionDirTest, SaveThenLoadRoundTrips) {
  auto d = Open();
  ASSERT_TRUE(d->Save("abc-1_2", Sample(5)).ok());
  EXPECT_TRUE(d->Exists("abc-1_2"));
  auto s = d->Load("abc-1_2");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->owner, "owner-a");
  EXPECT_EQ(s->cache_tenant, "tenant-a");
  EXPECT_EQ(s->snapshot.history_size(), 5);
  EXPECT_EQ(s->snapshot.state(), std::string(1000, '\x5a'));
  // Replaced, not appended: only the final file remains.
  ASSERT_TRUE(d->Save("abc-1_2", Sample(7)).ok());
  EXPECT_EQ(d->Load("abc-1_2")->snapshot.history_size(), 7);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(absl::IsNotFound(d->Load("unknown").status()));
}

TEST_F(SessionDirTest, IdsThatAreNotSafeFileNamesAreRefused) {
  auto d = Open();
  for (const std::string& id : std::vector<std::string>{"", "../x", "a/b", "a.b", std::string(129, 'a')}) {
    EXPECT_TRUE(absl::IsInvalidArgument(d->Save(id, Sample(1)))) << id;
    EXPECT_TRUE(absl::IsInvalidArgument(d->Load(id).status())) << id;
    EXPECT_FALSE(d->Exists(id));
  }
  EXPECT_TRUE(d->Save(std::string(128, 'a'), Sample(1)).ok());
}

TEST_F(SessionDirTest, CorruptOrTruncatedFilesAreDataLossAndDeleted) {
  auto d = Open();
  for (bool truncate : {false, true}) {
    ASSERT_TRUE(d->Save("s1", Sample(20)).ok());
    const std::string path = dir_ + "/s1.session";
    const auto size = fs::file_size(path);
    if (truncate) {
      fs::resize_file(path, size - 10);
    } else {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      f.put('\x01');
    }
    EXPECT_TRUE(absl::IsDataLoss(d->Load("s1").status())) << truncate;
    EXPECT_FALSE(fs::exists(path));
  }
}

TEST_F(SessionDirTest, ChangesByAnotherReplicaAreSeen) {
  auto a = Open();
  auto b = Open();
  EXPECT_EQ(b->Check("s"), SessionDirectory::Change::kUnchanged);  // never seen by b
  ASSERT_TRUE(a->Save("s", Sample(3)).ok());
  ASSERT_TRUE(b->Load("s").ok());
  EXPECT_EQ(b->Check("s"), SessionDirectory::Change::kUnchanged);
  EXPECT_EQ(a->Check("s"), SessionDirectory::Change::kUnchanged);  // a wrote it
  ASSERT_TRUE(b->Save("s", Sample(4)).ok());                       // b continues it
  EXPECT_EQ(a->Check("s"), SessionDirectory::Change::kChanged);
  ASSERT_TRUE(a->Load("s").ok());
  b->Remove("s");  // b deletes it
  EXPECT_EQ(a->Check("s"), SessionDirectory::Change::kDeleted);
  EXPECT_EQ(a->Check("s"), SessionDirectory::Change::kUnchanged);  // reported once
}

// The file system of the default Env, with a hook run after each write has
// renamed its file into place and after each delete (before Save or Remove
// returns).
class AfterWriteEnv final : public checkpoint::Env {
 public:
  std::function<void()> after_change;
  absl::Status CreateDir(const std::string& dir) override { return base_->CreateDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override { return base_->ListDir(dir); }
  absl::StatusOr<checkpoint::FileInfo> Stat(const std::string& path) override { return base_->Stat(path); }
  absl::StatusOr<std::unique_ptr<checkpoint::RandomAccessFile>> OpenForRead(const std::string& path) override {
    return base_->OpenForRead(path);
  }
  absl::StatusOr<checkpoint::FileInfo> WriteFileAtomically(const std::string& path, const std::string& tmp_path,
                                                           std::span<const std::span<const std::byte>> parts) override {
    auto written = base_->WriteFileAtomically(path, tmp_path, parts);
    if (after_change) after_change();
    return written;
  }
  absl::Status DeleteFile(const std::string& path) override {
    absl::Status deleted = base_->DeleteFile(path);
    if (after_change) after_change();
    return deleted;
  }

 private:
  checkpoint::Env* const base_ = checkpoint::Env::Default();
};

// Issue 30: a request that checks a session's file while this replica's own
// write or delete of it is under way (the previous request persisting its
// turn, which its client gave up on just as it ended OK) must not take it
// for another replica's change: the server then dropped the live session
// and answered ABORTED ("busy") at once instead of waiting for it.
TEST_F(SessionDirTest, OwnWriteUnderWayIsNoChange) {
  AfterWriteEnv env;
  auto d = SessionDirectory::Create(dir_, std::chrono::seconds(3600), &env);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Save("s1", Sample(3)).ok());
  std::vector<SessionDirectory::Change> during;
  env.after_change = [&] { during.push_back((*d)->Check("s1")); };
  ASSERT_TRUE((*d)->Save("s1", Sample(4)).ok());
  (*d)->Remove("s1");
  EXPECT_EQ(during, std::vector<SessionDirectory::Change>(2, SessionDirectory::Change::kUnchanged));
  EXPECT_EQ((*d)->Check("s1"), SessionDirectory::Change::kUnchanged);  // its own delete: nothing to report
  ASSERT_TRUE((*d)->Save("s1", Sample(4)).ok());
  env.after_change = nullptr;
  EXPECT_EQ((*d)->Check("s1"), SessionDirectory::Change::kUnchanged);
  auto other = Open();  // another replica continues it: still seen
  ASSERT_TRUE(other->Save("s1", Sample(5)).ok());
  EXPECT_EQ((*d)->Check("s1"), SessionDirectory::Change::kChanged);
}

TEST_F(SessionDirTest, OldFilesExpire) {
  auto d = Open(std::chrono::seconds(60));
  ASSERT_TRUE(d->Save("old", Sample(2)).ok());
  ASSERT_TRUE(d->Save("fresh", Sample(2)).ok());
  const std::string stale_tmp = dir_ + "/gone.session.tmp.1.0";
  std::ofstream(stale_tmp) << "partial";
  // Two minutes ago: older than the expiry.
  const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(2);
  fs::last_write_time(dir_ + "/old.session", old);
  fs::last_write_time(stale_tmp, old);
  EXPECT_TRUE(absl::IsNotFound(d->Load("old").status()));
  EXPECT_FALSE(fs::exists(dir_ + "/old.session"));
  ASSERT_TRUE(d->Save("old", Sample(2)).ok());
  fs::last_write_time(dir_ + "/old.session", old);
  EXPECT_EQ(d->RemoveExpired(), 1u);
  EXPECT_FALSE(fs::exists(stale_tmp));
  EXPECT_TRUE(d->Load("fresh").ok());
}

TEST_F(SessionDirTest, CreateRefusesBadArguments) {
  EXPECT_TRUE(absl::IsInvalidArgument(SessionDirectory::Create("", std::chrono::seconds(1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(SessionDirectory::Create(dir_, std::chrono::seconds(0)).status()));
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_FALSE(SessionDirectory::Create(dir_ + "/file/sub", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(SessionDirectory::Create(dir_ + "/new", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/new"));
}

// A failing disk: a write that fails (full disk) is RESOURCE_EXHAUSTED and
// leaves the previous version readable and unchanged for Check; a read that
// fails (EIO) is an error that deletes nothing, and the next read succeeds.
TEST_F(SessionDirTest, DiskFaultsChangeNothing) {
  testing::FaultEnv env;
  auto d = SessionDirectory::Create(dir_, std::chrono::seconds(3600), &env);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Save("s1", Sample(5)).ok());
  env.Fail(testing::FaultEnv::Op::kWrite, "/s1.session", ENOSPC);
  absl::Status full = (*d)->Save("s1", Sample(9));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_EQ((*d)->Check("s1"), SessionDirectory::Change::kUnchanged);
  env.Fail(testing::FaultEnv::Op::kRead, "/s1.session", EIO);
  absl::StatusOr<PersistedSession> failed = (*d)->Load("s1");
  EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
  EXPECT_TRUE((*d)->Exists("s1"));
  absl::StatusOr<PersistedSession> again = (*d)->Load("s1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->snapshot.history_size(), 5);
  EXPECT_EQ(env.failures(), 2);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary file left behind
}

}  // namespace
}  // namespace cairn::service
