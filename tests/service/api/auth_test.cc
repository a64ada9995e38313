#include "service/api/auth.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cairn::service {
namespace {

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  // Rewrites the file in place (the same inode).
  void Rewrite(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  // A new file renamed over the old one, as a rotation does.
  void Replace(const std::string& text) {
    std::ofstream(dir_ + "/tokens.new") << text;
    std::filesystem::rename(dir_ + "/tokens.new", path_);
  }
  static absl::StatusCode Code(const Authenticator& a, const std::string& token) {
    return a.Authenticate(std::string_view("Bearer " + token)).status().code();
  }
  cairn::testing::TempDir temp_{"cairn-auth"};
  const std::string dir_ = temp_.path();
  const std::string path_ = dir_ + "/tokens";
};

TEST_F(AuthenticatorTest, StaticTokens) {
  auto a = Authenticator::Create({"alpha", "beta"}, false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->enabled());
  EXPECT_EQ(Code(**a, "alpha"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "gamma"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*a)->Authenticate(std::nullopt).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*a)->Authenticate(std::string_view("Basic alpha")).status().code(), absl::StatusCode::kUnauthenticated);
  // Tenants: one per token, unless they share the cache.
  EXPECT_NE((*a)->Authenticate(std::string_view("Bearer alpha"))->owner,
            (*a)->Authenticate(std::string_view("Bearer beta"))->owner);
  EXPECT_EQ((*a)->Authenticate(std::string_view("Bearer alpha"))->cache_tenant,
            (*a)->Authenticate(std::string_view("Bearer alpha"))->owner);
  auto off = Authenticator::Create({}, false);
  EXPECT_FALSE((*off)->enabled());
  EXPECT_TRUE((*off)->Authenticate(std::nullopt).ok());
  EXPECT_EQ(Authenticator::Create({""}, false).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AuthenticatorTest, AFileThatCannotServeIsAStartError) {
  EXPECT_EQ(Authenticator::CreateFromFile(path_, false, absl::Seconds(1)).status().code(), absl::StatusCode::kNotFound);
  Rewrite("# only a comment\n\n");
  EXPECT_EQ(Authenticator::CreateFromFile(path_, false, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(AuthenticatorTest, TheTokenFileIsReReadWhenItChanges) {
  Replace("old-token\n");
  auto a = Authenticator::CreateFromFile(path_, false, absl::ZeroDuration());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->enabled());
  EXPECT_EQ(Code(**a, "old-token"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "new-token"), absl::StatusCode::kUnauthenticated);
  // Rotated by a rename: the new token in, the old one out.
  Replace("new-token\n");
  EXPECT_EQ(Code(**a, "new-token"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "old-token"), absl::StatusCode::kUnauthenticated);
  // Rewritten in place.
  Rewrite("# two now\nnew-token\nthird-token\n");
  EXPECT_EQ(Code(**a, "third-token"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "new-token"), absl::StatusCode::kOk);
  // A file gone or half written (no token yet) keeps the tokens read before,
  // rather than locking everyone out mid-rotation.
  std::filesystem::remove(path_);
  EXPECT_EQ(Code(**a, "third-token"), absl::StatusCode::kOk);
  Rewrite("");
  EXPECT_EQ(Code(**a, "third-token"), absl::StatusCode::kOk);
  Rewrite("last-token\n");
  EXPECT_EQ(Code(**a, "last-token"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "third-token"), absl::StatusCode::kUnauthenticated);
}

TEST_F(AuthenticatorTest, TheFileIsCheckedAtMostOncePerRefreshInterval) {
  Replace("old-token\n");
  auto a = Authenticator::CreateFromFile(path_, false, absl::Hours(1));
  ASSERT_TRUE(a.ok()) << a.status();
  Replace("new-token\n");
  EXPECT_EQ(Code(**a, "old-token"), absl::StatusCode::kOk);
  EXPECT_EQ(Code(**a, "new-token"), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace cairn::service
