#include "checkpoint/env.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cairn::checkpoint {
namespace {

namespace fs = std::filesystem;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cairn-env-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::span<const std::byte> Bytes(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
  }
  absl::StatusOr<FileInfo> Write(const std::string& name, const std::string& a, const std::string& b) {
    const std::span<const std::byte> parts[] = {Bytes(a), Bytes(b)};
    return env_->WriteFileAtomically(dir_ + "/" + name, dir_ + "/" + name + ".tmp", parts);
  }
  std::string Read(const std::string& name) {
    auto file = env_->OpenForRead(dir_ + "/" + name);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "";
    std::string out((*file)->info().size, '\0');
    EXPECT_TRUE((*file)->Read(0, {reinterpret_cast<std::byte*>(out.data()), out.size()}).ok());
    return out;
  }

  Env* const env_ = Env::Default();
  std::string dir_;
};

TEST_F(EnvTest, AtomicWriteReplacesTheFileAndReportsIt) {
  auto first = Write("f", "hello ", "world");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size, 11u);
  EXPECT_EQ(Read("f"), "hello world");
  auto second = Write("f", "", "x");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(Read("f"), "x");
  EXPECT_FALSE(*first == *second);  // another version
  auto stat = env_->Stat(dir_ + "/f");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(*stat, *second);
  auto names = env_->ListDir(dir_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"f"});  // no temporary file, no "." or ".."
}

// A real failure of rename(2) (the target is a non-empty directory): an
// error naming the temporary file, the target untouched, no temporary file.
TEST_F(EnvTest, FailedRenameLeavesNothingBehind) {
  fs::create_directory(dir_ + "/busy");
  std::ofstream(dir_ + "/busy/inside") << "keep";
  auto written = Write("busy", "new", "");
  EXPECT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("rename " + dir_ + "/busy.tmp"), std::string::npos) << written.status();
  EXPECT_FALSE(fs::exists(dir_ + "/busy.tmp"));
  EXPECT_TRUE(fs::is_directory(dir_ + "/busy"));
  EXPECT_TRUE(fs::exists(dir_ + "/busy/inside"));
}

TEST_F(EnvTest, ErrorsCarryTheirCodeAndPath) {
  const std::string missing = dir_ + "/missing";
  EXPECT_TRUE(absl::IsNotFound(env_->DeleteFile(missing)));
  EXPECT_TRUE(absl::IsNotFound(env_->OpenForRead(missing).status()));
  EXPECT_TRUE(absl::IsNotFound(env_->Stat(missing).status()));
  EXPECT_TRUE(absl::IsNotFound(env_->ListDir(missing).status()));
  EXPECT_NE(env_->Stat(missing).status().message().find(missing), std::string::npos);
  // A directory under a regular file cannot be created.
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_FALSE(env_->CreateDir(dir_ + "/file/sub").ok());
  EXPECT_TRUE(env_->CreateDir(dir_ + "/sub").ok());
  EXPECT_TRUE(env_->CreateDir(dir_ + "/sub").ok());  // exists already: fine
  // Reading past the end is DATA_LOSS, not a short read.
  ASSERT_TRUE(Write("short", "abc", "").ok());
  auto file = env_->OpenForRead(dir_ + "/short");
  ASSERT_TRUE(file.ok());
  std::byte buf[4];
  EXPECT_TRUE(absl::IsDataLoss((*file)->Read(0, buf)));
  EXPECT_TRUE((*file)->Read(1, std::span(buf, 2)).ok());
  EXPECT_EQ(static_cast<char>(buf[0]), 'b');
}

}  // namespace
}  // namespace cairn::checkpoint
