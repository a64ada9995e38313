// JSON and template values: a conversation's JSON (tools, tool-call
// arguments, template arguments) as values, and the tojson filter as
// transformers defines it: Python's json.dumps(x, ensure_ascii=False,
// indent=..., separators=..., sort_keys=...).
#ifndef CAIRN_CHAT_JINJA_JSON_H_
#define CAIRN_CHAT_JINJA_JSON_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chat/jinja/value.h"
#include "nlohmann/json.hpp"

namespace cairn::jinja {

// Deepest JSON nesting FromJson accepts.
inline constexpr int kMaxJsonDepth = 128;

// Objects become dicts in the JSON's key order, arrays lists, numbers int
// or float as Python's json.loads makes them. With `client`, strings (keys
// included) and numbers are client values. INVALID_ARGUMENT beyond
// kMaxJsonDepth.
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, bool client);

struct JsonOptions {
  bool ensure_ascii = false;
  // Unset: one line. Otherwise each item on its own line, indented by this
  // string per level.
  std::optional<std::string> indent;
  // Unset: ", " and ": " (',' and ": " with an indent), as Python's.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// json.dumps. TypeError "Object of type X is not JSON serializable" for
// what JSON cannot hold (Undefined, generators, namespaces ...);
// RESOURCE_EXHAUSTED past `max_bytes`. Client strings and numbers stay
// client text in the result.
absl::StatusOr<Text> ToJson(const Value& v, const JsonOptions& options, size_t max_bytes);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_JSON_H_
