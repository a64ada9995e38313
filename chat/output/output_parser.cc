#include "chat/output/output_parser.h"

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "chat/output/grammar_parser.h"
#include "chat/output/grammars.h"

namespace cairn::chat::output {

std::function<std::string()> RandomToolCallIds() {
  // One engine per parser, seeded from the system's entropy: ids must not
  // repeat across replies (clients match tool results to calls by id).
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[pick(*engine)]);
    return id;
  };
}

absl::StatusOr<std::unique_ptr<OutputParser>> CreateOutputParser(OutputParserOptions options) {
  std::function<std::string()> make_id = options.make_id ? std::move(options.make_id) : RandomToolCallIds();
  return CreateGrammarParser(GrammarFor(options.format, options.starts_in_reasoning), std::move(make_id));
}

}  // namespace cairn::chat::output
