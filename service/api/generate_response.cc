#include "service/api/generate_response.h"

namespace cairn::service {
namespace {

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kEndOfGeneration:
      return v1::FINISH_REASON_END_OF_GENERATION;
    case FinishReason::kStopToken:
      return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kStopString:
      return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kContextFull:
      return v1::FINISH_REASON_CONTEXT_FULL;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void Fill(const PromptProcessed& e, v1::GenerateResponse* out) {
  v1::PromptInfo* info = out->mutable_prompt();
  info->set_prompt_tokens(static_cast<int32_t>(e.stats.prompt_symbols));
  info->set_prompt_positions(e.stats.prompt_positions);
  info->set_reused_tokens(e.stats.reused);
  info->set_recomputed_tokens(e.stats.recomputed);
  info->set_restored_checkpoint_pos(e.stats.restored_pos);
  info->set_reuse_source(e.stats.reused == 0 ? "none" : checkpoint::ReuseKindName(e.stats.source));
  info->set_session_id(e.session_id);
}

void Fill(const TokenGenerated& e, v1::GenerateResponse* out) {
  v1::TokenDelta* d = out->mutable_token();
  d->set_id(e.token.id);
  if (e.logprobs) {
    d->set_logprob(e.token.logprob);
    for (const auto& [id, lp] : e.token.top) {
      v1::TopLogprob* t = d->add_top_logprobs();
      t->set_id(id);
      t->set_logprob(lp);
    }
  }
  d->set_text(e.text);
}

void Fill(const GenerationFinished& e, v1::GenerateResponse* out) {
  v1::Finished* f = out->mutable_finished();
  f->set_reason(ToProto(e.reason));
  f->set_matched_stop(e.matched_stop);
  f->set_text(e.text);
  v1::Usage* u = f->mutable_usage();
  u->set_prompt_tokens(static_cast<int32_t>(e.stats.prompt_symbols));
  u->set_reused_tokens(e.stats.reused);
  u->set_recomputed_tokens(e.stats.recomputed);
  u->set_completion_tokens(e.completion_tokens);
  v1::Timings* t = f->mutable_timings();
  t->set_queue_seconds(e.queue_seconds);
  t->set_prefill_seconds(e.prefill_seconds);
  t->set_time_to_first_token_seconds(e.time_to_first_token_seconds);
  t->set_decode_seconds(e.decode_seconds);
  t->set_decode_tokens_per_second(e.decode_tokens_per_second);
}

}  // namespace

v1::GenerateResponse ToResponse(const GenerateEvent& event) {
  v1::GenerateResponse out;
  std::visit([&](const auto& e) { Fill(e, &out); }, event);
  return out;
}

}  // namespace cairn::service
