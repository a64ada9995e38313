#include "service/api/reply_parser.h"

#include <string>
#include <utility>

#include "chat/output/format_detection.h"

namespace cairn::service {

namespace out = chat::output;

std::vector<TokenId> TurnContinuingTokens(const Tokenizer& tokenizer, out::OutputFormat format) {
  std::vector<TokenId> ids;
  if (format != out::OutputFormat::kHarmony) return ids;
  if (std::optional<TokenId> end = tokenizer.FindToken("<|end|>");
      end.has_value() && tokenizer.IsEndOfGeneration(*end)) {
    ids.push_back(*end);
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<ReplyParser>> ReplyParser::Create(const ServedModel& model,
                                                                 const PromptRendering& rendering) {
  if (!rendering.rendered || model.tokenizer == nullptr || !model.chat_template.has_value() ||
      model.chat_template->kind() != ChatTemplateKind::kJinja) {
    return nullptr;
  }
  out::OutputParserOptions options;
  options.format = out::DetectOutputFormat(model.chat_template->source(rendering.with_tools));
  options.starts_in_reasoning = out::PromptOpensReasoning(options.format, rendering.text);
  const out::OutputFormat format = options.format;
  auto parser = out::CreateOutputParser(std::move(options));
  if (!parser.ok()) return parser.status();
  return std::unique_ptr<ReplyParser>(new ReplyParser(*model.tokenizer, format, *std::move(parser)));
}

ReplyParser::ReplyParser(const Tokenizer& tokenizer, out::OutputFormat format,
                         std::unique_ptr<out::OutputParser> parser)
    : detok_(tokenizer, DetokenizeOptions{.render_special = true}), format_(format), parser_(std::move(parser)) {}

void ReplyParser::Add(std::vector<out::OutputEvent> events, google::protobuf::RepeatedPtrField<v1::OutputPiece>* pieces,
                      std::vector<v1::ToolCall>* calls) {
  for (out::OutputEvent& e : events) {
    if (e.kind == out::OutputEvent::Kind::kToolCall) {
      v1::ToolCall& call = calls->emplace_back();
      call.set_id(std::move(e.tool_call.id));
      call.set_name(std::move(e.tool_call.name));
      call.set_arguments(std::move(e.tool_call.arguments));
      call.set_arguments_not_json(e.tool_call.arguments_raw);
      called_tools_ = true;
      continue;
    }
    if (e.text.empty()) continue;
    v1::OutputPiece* piece = pieces->Add();
    piece->set_kind(e.kind == out::OutputEvent::Kind::kReasoning ? v1::OUTPUT_KIND_REASONING : v1::OUTPUT_KIND_CONTENT);
    piece->set_text(std::move(e.text));
  }
}

void ReplyParser::Token(TokenId id, bool ends_generation, v1::TokenDelta* delta, std::vector<v1::ToolCall>* calls) {
  if (ends_generation) return;
  std::string text;
  // Ids come from the model's own vocabulary; a parser not finished never fails.
  detok_.Push(id, &text).IgnoreError();
  auto events = parser_->Feed(text);
  if (events.ok()) Add(*std::move(events), delta->mutable_pieces(), calls);
}

void ReplyParser::Finish(v1::Finished* finished, std::vector<v1::ToolCall>* calls) {
  std::string tail;
  detok_.Flush(&tail);
  if (auto events = parser_->Feed(tail); events.ok()) Add(*std::move(events), finished->mutable_pieces(), calls);
  auto rest = parser_->Finish();
  if (rest.ok()) Add(std::move(rest->events), finished->mutable_pieces(), calls);
  const bool turn_ended = finished->reason() == v1::FINISH_REASON_END_OF_GENERATION ||
                          finished->reason() == v1::FINISH_REASON_STOP_TOKEN ||
                          finished->reason() == v1::FINISH_REASON_STOP_STRING;
  if (called_tools_ && turn_ended) finished->set_reason(v1::FINISH_REASON_TOOL_CALLS);
}

}  // namespace cairn::service
