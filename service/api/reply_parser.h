// The parsed reply of a Generate request whose prompt was rendered from
// messages by a Jinja chat template: each generated token's text, with the
// special tokens of the format rendered, fed to chat/output's parser in the
// format the template implies (DetectOutputFormat), starting in reasoning
// when the generation prompt opened it (PromptOpensReasoning). Its events
// become TokenDelta.pieces and ToolCall messages; the finish reason becomes
// TOOL_CALLS when the reply called tools. Parsing only adds to the stream:
// ids and raw text are unchanged, and sessions keep the raw tokens.
#ifndef CAIRN_SERVICE_API_REPLY_PARSER_H_
#define CAIRN_SERVICE_API_REPLY_PARSER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/detokenizer.h"
#include "cairn/v1/inference.pb.h"
#include "chat/output/output_parser.h"
#include "service/api/prompt_builder.h"
#include "service/host/models.h"

namespace cairn::service {

// End-of-generation tokens that do not end a reply in `format`: gpt-oss
// (harmony) ends a message with <|end|> and its turn only with <|return|>
// or <|call|>. Empty for the other formats.
std::vector<TokenId> TurnContinuingTokens(const Tokenizer& tokenizer, chat::output::OutputFormat format);

// Not thread-safe: one per request, used by one thread at a time. The
// model's tokenizer must outlive it.
class ReplyParser final {
 public:
  // The parser of a reply to `rendering`; null when the reply is not
  // parsed (a prompt of parts, or a model without a Jinja template).
  static absl::StatusOr<std::unique_ptr<ReplyParser>> Create(const ServedModel& model,
                                                             const PromptRendering& rendering);

  chat::output::OutputFormat format() const { return format_; }

  // Feeds one generated token (skipped when it ends the generation: its
  // text is not part of the reply); the pieces it releases go to `delta`,
  // the tool calls it completes to `calls`.
  void Token(TokenId id, bool ends_generation, v1::TokenDelta* delta, std::vector<v1::ToolCall>* calls);
  // Ends the reply: held-back pieces to `finished`, the last tool calls to
  // `calls`; a reply that called tools and ended its turn (not cut by
  // max_tokens or the context) finishes with FINISH_REASON_TOOL_CALLS.
  void Finish(v1::Finished* finished, std::vector<v1::ToolCall>* calls);

 private:
  ReplyParser(const Tokenizer& tokenizer, chat::output::OutputFormat format,
              std::unique_ptr<chat::output::OutputParser> parser);
  // Appends `events` as pieces (to `pieces`) and calls.
  void Add(std::vector<chat::output::OutputEvent> events, google::protobuf::RepeatedPtrField<v1::OutputPiece>* pieces,
           std::vector<v1::ToolCall>* calls);

  StreamingDetokenizer detok_;
  chat::output::OutputFormat format_;
  std::unique_ptr<chat::output::OutputParser> parser_;
  bool called_tools_ = false;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_REPLY_PARSER_H_
