#include "service/api/generate_response.h"

#include "gtest/gtest.h"

namespace cairn::service {
namespace {

TEST(GenerateEventsTest, PromptProcessedCarriesTheReuse) {
  PromptProcessed e;
  e.stats.prompt_symbols = 12;
  e.stats.prompt_positions = 10;
  e.stats.reused = 8;
  e.stats.recomputed = 2;
  e.stats.restored_pos = 6;
  e.session_id = "s1";
  const v1::PromptInfo info = ToResponse(e).prompt();
  EXPECT_EQ(info.prompt_tokens(), 12);
  EXPECT_EQ(info.prompt_positions(), 10);
  EXPECT_EQ(info.reused_tokens(), 8);
  EXPECT_EQ(info.recomputed_tokens(), 2);
  EXPECT_EQ(info.restored_checkpoint_pos(), 6);
  EXPECT_EQ(info.reuse_source(), checkpoint::ReuseKindName(e.stats.source));
  EXPECT_EQ(info.session_id(), "s1");
  e.stats.reused = 0;
  EXPECT_EQ(ToResponse(e).prompt().reuse_source(), "none");
}

TEST(GenerateEventsTest, LogprobsOnlyWhenAsked) {
  TokenGenerated e;
  e.token.id = 7;
  e.token.logprob = -0.5f;
  e.token.top = {{7, -0.5f}, {3, -1.5f}};
  e.text = "hi";
  v1::TokenDelta d = ToResponse(e).token();
  EXPECT_EQ(d.id(), 7);
  EXPECT_EQ(d.text(), "hi");
  EXPECT_FALSE(d.has_logprob());
  EXPECT_EQ(d.top_logprobs_size(), 0);
  e.logprobs = true;
  d = ToResponse(e).token();
  ASSERT_TRUE(d.has_logprob());
  EXPECT_EQ(d.logprob(), -0.5f);
  ASSERT_EQ(d.top_logprobs_size(), 2);
  EXPECT_EQ(d.top_logprobs(1).id(), 3);
  EXPECT_EQ(d.top_logprobs(1).logprob(), -1.5f);
}

TEST(GenerateEventsTest, FinishedCarriesReasonUsageAndTimings) {
  const std::pair<FinishReason, v1::FinishReason> reasons[] = {
      {FinishReason::kLength, v1::FINISH_REASON_LENGTH},
      {FinishReason::kEndOfGeneration, v1::FINISH_REASON_END_OF_GENERATION},
      {FinishReason::kStopToken, v1::FINISH_REASON_STOP_TOKEN},
      {FinishReason::kStopString, v1::FINISH_REASON_STOP_STRING},
      {FinishReason::kContextFull, v1::FINISH_REASON_CONTEXT_FULL},
  };
  for (const auto& [reason, proto] : reasons) {
    GenerationFinished e;
    e.reason = reason;
    EXPECT_EQ(ToResponse(e).finished().reason(), proto);
  }
  GenerationFinished e;
  e.reason = FinishReason::kStopString;
  e.matched_stop = "END";
  e.text = "tail";
  e.stats.prompt_symbols = 5;
  e.stats.reused = 3;
  e.stats.recomputed = 2;
  e.completion_tokens = 4;
  e.queue_seconds = 0.25;
  e.prefill_seconds = 0.5;
  e.time_to_first_token_seconds = 1.0;
  e.decode_seconds = 2.0;
  e.decode_tokens_per_second = 1.5;
  const v1::Finished f = ToResponse(e).finished();
  EXPECT_EQ(f.matched_stop(), "END");
  EXPECT_EQ(f.text(), "tail");
  EXPECT_EQ(f.usage().prompt_tokens(), 5);
  EXPECT_EQ(f.usage().reused_tokens(), 3);
  EXPECT_EQ(f.usage().recomputed_tokens(), 2);
  EXPECT_EQ(f.usage().completion_tokens(), 4);
  EXPECT_EQ(f.usage().session_tokens(), 0);  // the service fills it in
  EXPECT_EQ(f.timings().queue_seconds(), 0.25);
  EXPECT_EQ(f.timings().prefill_seconds(), 0.5);
  EXPECT_EQ(f.timings().time_to_first_token_seconds(), 1.0);
  EXPECT_EQ(f.timings().decode_seconds(), 2.0);
  EXPECT_EQ(f.timings().decode_tokens_per_second(), 1.5);
}

}  // namespace
}  // namespace cairn::service
