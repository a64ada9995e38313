#include "chat/output/tool_call_syntax.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/output/bracket_scanner.h"

namespace cairn::chat::output {
namespace {

constexpr std::string_view kSpace = " \t\n\r";

// The end of the JSON object or array that starts at text[begin] (one past
// its closing bracket), or npos when it does not close.
size_t ValueEnd(std::string_view text, size_t begin) {
  BracketScanner scanner(Quoting::kJson);
  for (size_t i = begin; i < text.size(); ++i) {
    scanner.Advance(text[i]);
    if (scanner.closed()) return i + 1;
  }
  return std::string_view::npos;
}

const Json* Member(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string StringMember(const Json& object, std::string_view key) {
  const Json* value = Member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// One call object (see ParseJsonCallBlock); nullopt when it is not one.
std::optional<ToolCall> CallFromObject(const Json& object, bool require_arguments) {
  if (!object.is_object()) return std::nullopt;
  std::string id = StringMember(object, "id");
  if (id.empty()) id = StringMember(object, "tool_call_id");
  const Json* function = Member(object, "function");
  const Json& call = function != nullptr && function->is_object() ? *function : object;
  std::string name = StringMember(call, "name");
  if (name.empty()) name = StringMember(call, "tool_name");
  if (name.empty()) return std::nullopt;
  const Json* arguments = Member(call, "arguments");
  if (arguments == nullptr) arguments = Member(call, "parameters");
  if (arguments == nullptr && require_arguments) return std::nullopt;
  return CallWithArgumentsValue(std::move(name), arguments, std::move(id));
}

// The string value of the first `"key": "..."` in text (a JSON string's
// escapes are kept as written); empty when there is none.
std::string SalvageString(std::string_view text, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  for (size_t at = text.find(quoted); at != std::string_view::npos; at = text.find(quoted, at + 1)) {
    size_t i = text.find_first_not_of(kSpace, at + quoted.size());
    if (i == std::string_view::npos || text[i] != ':') continue;
    i = text.find_first_not_of(kSpace, i + 1);
    if (i == std::string_view::npos || text[i] != '"') continue;
    const size_t end = text.find('"', i + 1);
    if (end == std::string_view::npos) return std::string();
    return std::string(text.substr(i + 1, end - i - 1));
  }
  return std::string();
}

ParsedBlock Unparsed(std::string name, std::string_view raw_arguments) {
  ParsedBlock block;
  block.name = std::move(name);
  block.raw_arguments.assign(TrimSpace(raw_arguments));
  return block;
}

// Removes `prefix` (and the whitespace after it) from the front of *text.
bool Consume(std::string_view* text, std::string_view prefix) {
  if (text->substr(0, prefix.size()) != prefix) return false;
  text->remove_prefix(prefix.size());
  return true;
}

// The text between open_tag and close_tag at the front of *text (after
// whitespace), consumed; nullopt when it is not there.
std::optional<std::string_view> TakeElement(std::string_view* text, std::string_view open_tag,
                                            std::string_view close_tag) {
  std::string_view rest = TrimSpace(*text);
  if (!Consume(&rest, open_tag)) return std::nullopt;
  const size_t end = rest.find(close_tag);
  if (end == std::string_view::npos) return std::nullopt;
  *text = rest.substr(end + close_tag.size());
  return rest.substr(0, end);
}

// One newline on each side of an XML parameter's value is the template's.
std::string_view StripOneNewline(std::string_view value) {
  if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  return value;
}

// Gemma 4's argument syntax as JSON text: <|"|>-delimited strings become
// JSON strings, bare keys are quoted, Python's constants become JSON's.
std::optional<std::string> Gemma4ToJson(std::string_view text) {
  constexpr std::string_view kQuote = "<|\"|>";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kQuote.size()) == kQuote) {
      const size_t end = text.find(kQuote, i + kQuote.size());
      if (end == std::string_view::npos) return std::nullopt;
      out += DumpJson(Json(std::string(text.substr(i + kQuote.size(), end - i - kQuote.size()))));
      i = end + kQuote.size();
      continue;
    }
    const char c = text[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool number = (c >= '0' && c <= '9') || c == '-';
    if (!letter && !number) {
      out.push_back(c);
      ++i;
      continue;
    }
    const size_t end = text.find_first_not_of(
        number ? "0123456789.eE+-" : "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", i);
    const std::string_view word = text.substr(i, end - i);
    i = std::min(end, text.size());
    const size_t next = text.find_first_not_of(kSpace, i);
    if (number) {
      out.append(word);
    } else if (next != std::string_view::npos && text[next] == ':') {
      out += DumpJson(Json(std::string(word)));
    } else if (word == "true" || word == "True" || word == "false" || word == "False") {
      out += word.front() == 't' || word.front() == 'T' ? "true" : "false";
    } else if (word == "null" || word == "None") {
      out += "null";
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::string_view TrimSpace(std::string_view text) {
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::optional<Json> ParseJson(std::string_view text) {
  BracketScanner scanner(Quoting::kJson);
  for (char c : text) scanner.Advance(c);
  if (scanner.deepest() > kMaxNesting) return std::nullopt;
  Json value = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::string DumpJson(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

ToolCall CallWithArgumentsText(std::string name, std::string_view arguments, std::string id) {
  ToolCall call;
  call.id = std::move(id);
  call.name = std::move(name);
  const std::string_view trimmed = TrimSpace(arguments);
  const std::optional<Json> value = trimmed.empty() ? std::optional<Json>(Json::object()) : ParseJson(trimmed);
  if (value.has_value() && value->is_object()) {
    call.arguments = DumpJson(*value);
  } else {
    call.arguments.assign(trimmed);
    call.arguments_raw = true;
  }
  return call;
}

ToolCall CallWithArgumentsValue(std::string name, const Json* arguments, std::string id) {
  if (arguments != nullptr && arguments->is_string()) {
    return CallWithArgumentsText(std::move(name), arguments->get<std::string>(), std::move(id));
  }
  ToolCall call;
  call.id = std::move(id);
  call.name = std::move(name);
  if (arguments == nullptr || arguments->is_null()) {
    call.arguments = "{}";
  } else {
    call.arguments = DumpJson(*arguments);
    call.arguments_raw = !arguments->is_object();
  }
  return call;
}

ParsedBlock ParseJsonCallBlock(std::string_view text, bool require_arguments) {
  ParsedBlock block;
  block.ok = true;
  size_t i = 0;
  while (block.ok && (i = text.find_first_not_of(" \t\n\r,;", i)) != std::string_view::npos) {
    const size_t end = text[i] == '{' || text[i] == '[' ? ValueEnd(text, i) : std::string_view::npos;
    const std::optional<Json> value = end == std::string_view::npos ? std::nullopt : ParseJson(text.substr(i, end - i));
    block.ok = value.has_value();
    if (!block.ok) break;
    const bool is_list = value->is_array();
    for (const Json& element : is_list ? *value : Json::array({*value})) {
      std::optional<ToolCall> call = CallFromObject(element, require_arguments);
      block.ok = block.ok && call.has_value();
      if (block.ok) block.calls.push_back(std::move(*call));
    }
    i = end;
  }
  if (block.ok) return block;
  const bool has_arguments =
      text.find("\"arguments\"") != std::string_view::npos || text.find("\"parameters\"") != std::string_view::npos;
  std::string name;
  if (!require_arguments || has_arguments) {
    name = SalvageString(text, "name");
    if (name.empty()) name = SalvageString(text, "tool_name");
  }
  return Unparsed(std::move(name), text);
}

Json ParameterValue(std::string_view text) {
  if (std::optional<Json> value = ParseJson(text); value.has_value()) return *value;
  const std::string_view trimmed = TrimSpace(text);
  if (trimmed == "True") return true;
  if (trimmed == "False") return false;
  if (trimmed == "None") return nullptr;
  return std::string(text);
}

ParsedBlock ParseQwenXmlBlock(std::string_view text) {
  std::string_view rest = TrimSpace(text);
  if (!Consume(&rest, "<function=")) return Unparsed("", text);
  const size_t name_end = rest.find('>');
  if (name_end == std::string_view::npos) return Unparsed("", text);
  std::string name(TrimSpace(rest.substr(0, name_end)));
  rest.remove_prefix(name_end + 1);
  const std::string_view parameters_text = rest;
  Json arguments = Json::object();
  while (true) {
    std::string_view element = TrimSpace(rest);
    if (Consume(&element, "</function>")) {
      if (!TrimSpace(element).empty()) break;  // text after the function
      ParsedBlock block;
      block.ok = !name.empty();
      block.calls.push_back(CallWithArgumentsValue(name, &arguments));
      if (block.ok) return block;
      break;
    }
    if (!Consume(&element, "<parameter=")) break;
    const size_t key_end = element.find('>');
    const size_t value_end = element.find("</parameter>");
    if (key_end == std::string_view::npos || value_end == std::string_view::npos || key_end > value_end) break;
    const std::string key(TrimSpace(element.substr(0, key_end)));
    arguments[key] = ParameterValue(StripOneNewline(element.substr(key_end + 1, value_end - key_end - 1)));
    rest = element.substr(value_end + std::string_view("</parameter>").size());
  }
  const size_t function_end = parameters_text.rfind("</function>");
  return Unparsed(std::move(name), parameters_text.substr(0, function_end));
}

ParsedBlock ParseGlmBlock(std::string_view text) {
  std::string_view rest = text;
  const size_t name_end = rest.find("<arg_key>");
  std::string name(TrimSpace(rest.substr(0, name_end)));
  if (name.empty() || name.find('<') != std::string::npos) return Unparsed("", text);
  rest.remove_prefix(name_end == std::string_view::npos ? rest.size() : name_end);
  const std::string_view arguments_text = rest;
  Json arguments = Json::object();
  while (!TrimSpace(rest).empty()) {
    const std::optional<std::string_view> key = TakeElement(&rest, "<arg_key>", "</arg_key>");
    const std::optional<std::string_view> value =
        key.has_value() ? TakeElement(&rest, "<arg_value>", "</arg_value>") : std::nullopt;
    if (!value.has_value()) return Unparsed(std::move(name), arguments_text);
    arguments[std::string(TrimSpace(*key))] = ParameterValue(*value);
  }
  ParsedBlock block;
  block.ok = true;
  block.calls.push_back(CallWithArgumentsValue(std::move(name), &arguments));
  return block;
}

ParsedBlock ParseInvokeBlock(std::string_view text, std::string_view prefix) {
  const std::string invoke = "<" + std::string(prefix) + "invoke name=\"";
  const std::string invoke_end = "</" + std::string(prefix) + "invoke>";
  const std::string parameter = "<" + std::string(prefix) + "parameter name=\"";
  const std::string parameter_end = "</" + std::string(prefix) + "parameter>";
  ParsedBlock block;
  for (std::string_view rest = TrimSpace(text); !rest.empty(); rest = TrimSpace(rest)) {
    const size_t name_end = Consume(&rest, invoke) ? rest.find("\">") : std::string_view::npos;
    if (name_end == std::string_view::npos) return Unparsed("", text);
    std::string name(rest.substr(0, name_end));
    if (name.empty()) return Unparsed("", text);
    rest.remove_prefix(name_end + 2);
    Json arguments = Json::object();
    for (rest = TrimSpace(rest); !Consume(&rest, invoke_end); rest = TrimSpace(rest)) {
      if (!Consume(&rest, parameter)) return Unparsed(std::move(name), text);
      const size_t key_end = rest.find('"');
      const size_t open_end = rest.find('>');
      const size_t value_end = rest.find(parameter_end);
      // npos is the largest: these also catch a missing piece.
      if (value_end == std::string_view::npos || open_end > value_end || key_end > open_end) {
        return Unparsed(std::move(name), text);
      }
      const std::string_view value = rest.substr(open_end + 1, value_end - open_end - 1);
      const bool is_string = rest.substr(key_end, open_end - key_end).find("string=\"true\"") != std::string_view::npos;
      arguments[std::string(rest.substr(0, key_end))] = is_string ? Json(std::string(value)) : ParameterValue(value);
      rest.remove_prefix(value_end + parameter_end.size());
    }
    block.calls.push_back(CallWithArgumentsValue(std::move(name), &arguments));
  }
  block.ok = true;
  return block;
}

ParsedBlock ParseGemma4Block(std::string_view text) {
  std::string_view rest = TrimSpace(text);
  Consume(&rest, "call:");
  const size_t open = rest.find('{');
  std::string name(TrimSpace(rest.substr(0, open)));
  if (name.empty() || name.find_first_of(" \t\n\r<>") != std::string::npos) return Unparsed("", text);
  if (open == std::string_view::npos) return Unparsed(std::move(name), "");
  const std::string_view arguments = rest.substr(open);
  const std::optional<std::string> json = Gemma4ToJson(arguments);
  const std::optional<Json> value = json.has_value() ? ParseJson(*json) : std::nullopt;
  if (!value.has_value() || !value->is_object()) return Unparsed(std::move(name), arguments);
  ParsedBlock block;
  block.ok = true;
  block.calls.push_back(CallWithArgumentsValue(std::move(name), &*value));
  return block;
}

}  // namespace cairn::chat::output
