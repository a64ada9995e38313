// The history a client states (GenerateRequest.session_tokens): its checks
// on the request alone, and the cut of a session's history to it.
#include "service/api/stated_history.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace cairn::service {
namespace {

v1::GenerateRequest OnSession(int32_t session_tokens) {
  v1::GenerateRequest req;
  req.set_session_id("s1");
  req.set_append(true);
  req.set_session_tokens(session_tokens);
  return req;
}

// Two messages of tokens with an embedding chunk in the second.
History TwoMessages() {
  History h;
  for (TokenId t : {11, 12, 13}) h.AddToken(t);
  h.EndMessage();
  h.AddToken(21);
  auto chunk = std::make_shared<ChunkData>();
  chunk->width = 2;
  chunk->nx = 1;
  chunk->ny = 1;
  chunk->rows = {0.5f, -0.5f};
  h.AddChunk(chunk);
  h.AddToken(22);
  h.EndMessage();
  return h;
}

TEST(StatedHistoryTest, UnsetMeansTheHistoryAsItStands) {
  v1::GenerateRequest req = OnSession(0);
  req.clear_session_tokens();
  EXPECT_TRUE(CheckStatedHistory(req).ok());
  auto cut = StatedHistory(TwoMessages(), req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_FALSE(cut->has_value());
  req.clear_session_id();  // a sessionless request without the field
  EXPECT_TRUE(CheckStatedHistory(req).ok());
}

TEST(StatedHistoryTest, TheWholeHistoryNeedsNoCut) {
  auto cut = StatedHistory(TwoMessages(), OnSession(6));
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_FALSE(cut->has_value());
}

TEST(StatedHistoryTest, CutsBackWithItsMessageBoundaries) {
  const History h = TwoMessages();
  auto cut = StatedHistory(h, OnSession(5));  // inside the second message, after the chunk
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_TRUE(cut->has_value());
  EXPECT_EQ((*cut)->size(), 5u);
  EXPECT_EQ((*cut)->Tokens(), (std::vector<TokenId>{11, 12, 13, 21, -1}));
  EXPECT_EQ((*cut)->items[4].chunk, h.items[4].chunk);  // shared, not copied
  EXPECT_EQ((*cut)->message_ends, (std::vector<size_t>{3}));
  EXPECT_EQ(h.size(), 6u);  // the committed history is the caller's to change

  auto empty = StatedHistory(h, OnSession(0));
  ASSERT_TRUE(empty.ok()) << empty.status();
  ASSERT_TRUE(empty->has_value());
  EXPECT_TRUE((*empty)->empty());
  EXPECT_TRUE((*empty)->message_ends.empty());
}

TEST(StatedHistoryTest, LongerThanTheHistoryIsAFailedPrecondition) {
  auto cut = StatedHistory(TwoMessages(), OnSession(7));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cut.status().message().find("session_tokens is 7: session 's1' has 6"), std::string::npos) << cut.status();
  EXPECT_EQ(StatedHistory(History{}, OnSession(1)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StatedHistoryTest, NegativeOrSessionlessIsInvalid) {
  EXPECT_EQ(CheckStatedHistory(OnSession(-1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatedHistory(TwoMessages(), OnSession(-1)).status().code(), absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest sessionless = OnSession(0);
  sessionless.clear_session_id();
  sessionless.set_append(false);
  const absl::Status st = CheckStatedHistory(sessionless);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("needs a session_id"), std::string::npos) << st;
}

}  // namespace
}  // namespace cairn::service
