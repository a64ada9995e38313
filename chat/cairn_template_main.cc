// cairn-template: renders a chat template over the conversations of a
// cases.json (the format of ../shared/chat_templates) and writes one JSON
// line per case, {"case": ..., "text": ...} or {"case": ..., "error": ...},
// byte for byte as that folder's expected/*.jsonl (Python's json.dumps with
// ensure_ascii=False), so that any template can be checked from the shell:
//
//   cairn-template --template FILE.jinja --cases cases.json --out NAME.jsonl
//   cmp NAME.jsonl expected/NAME.jsonl
//
// Exit status: 0 when the file is written (refusals are lines, not
// failures) and for --help; 1 for a usage error, a file that cannot be read
// or written, or a cases file that is not JSON of that format.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "chat/chat_template.h"
#include "chat/jinja/error.h"
#include "chat/jinja/json.h"
#include "nlohmann/json.hpp"

namespace cairn {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: cairn-template --template FILE.jinja --cases cases.json --out NAME.jsonl\n"
    "\n"
    "Renders the chat template over every conversation of cases.json and writes one\n"
    "JSON line per case: {\"case\": NAME, \"text\": RENDERED} or {\"case\": NAME, \"error\": \"Exception: message\"}\n"
    "where the template refuses the conversation, as ../shared/chat_templates/expected/ holds them.\n"
    "cases.json: {\"bos_token\", \"eos_token\", \"now\": \"YYYY-MM-DDTHH:MM:SS\" (strftime_now's clock),\n"
    "\"cases\": [{\"case\", \"messages\", \"add_generation_prompt\", [\"tools\"], [template arguments...]}]}.\n"
    "Options:\n"
    "  --template FILE   the Jinja chat template\n"
    "  --cases FILE      the conversations\n"
    "  --out FILE        where to write the lines ('-': standard output)\n"
    "  --help            this text\n";

// Fields read without nlohmann's exceptions: the default when absent or of
// another type.
std::string StringField(const Json& j, const char* key, std::string fallback = "") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return fallback;
  return j[key].get<std::string>();
}

std::optional<std::string> OptionalString(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return std::nullopt;
  return j[key].get<std::string>();
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A conversation of cases.json as a request (messages as cases.json shapes
// them; keys beyond case/messages/add_generation_prompt/tools are template
// arguments).
absl::StatusOr<ChatRequest> RequestOf(const Json& c) {
  if (!c.is_object() || !c.contains("messages") || !c["messages"].is_array()) {
    return absl::InvalidArgumentError("a case needs a \"messages\" array");
  }
  ChatRequest request;
  for (const Json& m : c["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return absl::InvalidArgumentError("a message needs a string \"role\"");
    }
    ChatMessage message(m["role"].get<std::string>(), std::nullopt);
    message.content = OptionalString(m, "content");
    message.reasoning_content = OptionalString(m, "reasoning_content");
    message.tool_call_id = OptionalString(m, "tool_call_id");
    message.name = OptionalString(m, "name");
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (const Json& call : m["tool_calls"]) {
        const Json function = call.is_object() && call.contains("function") ? call["function"] : Json::object();
        const Json arguments =
            function.is_object() && function.contains("arguments") ? function["arguments"] : Json::object();
        message.tool_calls.push_back({StringField(call, "id"), StringField(function, "name"),
                                      arguments.is_string() ? arguments.get<std::string>() : Dump(arguments)});
      }
    }
    request.messages.push_back(std::move(message));
  }
  request.add_generation_prompt = c.contains("add_generation_prompt") && c["add_generation_prompt"].is_boolean() &&
                                  c["add_generation_prompt"].get<bool>();
  if (c.contains("tools") && !c["tools"].is_null()) request.tools = Dump(c["tools"]);
  Json arguments = Json::object();
  for (const auto& [key, value] : c.items()) {
    if (key != "case" && key != "messages" && key != "add_generation_prompt" && key != "tools") arguments[key] = value;
  }
  if (!arguments.empty()) request.template_arguments = Dump(arguments);
  return request;
}

// The line Python's json.dumps(ensure_ascii=False) writes for the result.
std::string Line(const Json& name, const absl::StatusOr<RenderedChat>& rendered) {
  jinja::Dict line;
  auto name_value = jinja::FromJson(name, false);
  (void)line.Set(jinja::Value::String("case"), name_value.ok() ? *name_value : jinja::Value::None());
  if (rendered.ok()) {
    (void)line.Set(jinja::Value::String("text"), jinja::Value::String(rendered->Text()));
  } else {
    (void)line.Set(jinja::Value::String("error"), jinja::Value::String(std::string(rendered.status().message())));
  }
  auto json = jinja::ToJson(jinja::Value::FromDict(std::move(line)), jinja::JsonOptions(), size_t{1} << 32);
  return json.ok() ? json->bytes() : "{}";
}

int Run(const std::string& template_path, const std::string& cases_path, const std::string& out_path) {
  auto source = ReadFile(template_path);
  auto cases_text = ReadFile(cases_path);
  for (const auto* read : {&source, &cases_text}) {
    if (!read->ok()) {
      std::fprintf(stderr, "cairn-template: %s\n", read->status().ToString().c_str());
      return 1;
    }
  }
  const Json cases = Json::parse(*cases_text, nullptr, /*allow_exceptions=*/false);
  if (cases.is_discarded() || !cases.is_object() || !cases.contains("cases") || !cases["cases"].is_array()) {
    std::fprintf(stderr, "cairn-template: %s: not JSON with a \"cases\" array\n", cases_path.c_str());
    return 1;
  }
  ChatTemplateOptions options;
  if (cases.contains("now") && cases["now"].is_string()) {
    absl::CivilSecond now;
    if (!absl::ParseCivilTime(cases["now"].get<std::string>(), &now)) {
      std::fprintf(stderr, "cairn-template: %s: \"now\" is not YYYY-MM-DDTHH:MM:SS\n", cases_path.c_str());
      return 1;
    }
    options.now = [now] { return now; };
  }
  const ChatSpecialTokens tokens{StringField(cases, "bos_token"), StringField(cases, "eos_token")};
  auto tmpl = ChatTemplate::FromSource(*source, "file:" + template_path, tokens, options);
  if (!tmpl.ok())
    std::fprintf(stderr, "cairn-template: %s: %s\n", template_path.c_str(),
                 jinja::DescribeError(tmpl.status()).c_str());
  std::ofstream file;
  if (out_path != "-") {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::fprintf(stderr, "cairn-template: cannot write %s\n", out_path.c_str());
      return 1;
    }
  }
  std::ostream& out = out_path == "-" ? std::cout : file;
  int rendered_count = 0, refused_count = 0;
  for (const Json& c : cases["cases"]) {
    auto request = RequestOf(c);
    if (!request.ok()) {
      std::fprintf(stderr, "cairn-template: %s: case %s: %s\n", cases_path.c_str(), StringField(c, "case", "?").c_str(),
                   std::string(request.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<RenderedChat> rendered =
        tmpl.ok() ? tmpl->Render(*request) : absl::StatusOr<RenderedChat>(tmpl.status());
    ++(rendered.ok() ? rendered_count : refused_count);
    out << Line(c.is_object() && c.contains("case") ? c["case"] : Json(), rendered) << "\n";
  }
  out.flush();
  if (!out) {
    std::fprintf(stderr, "cairn-template: writing %s failed\n", out_path.c_str());
    return 1;
  }
  std::fprintf(stderr, "cairn-template: %d cases rendered, %d refused\n", rendered_count, refused_count);
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  std::string template_path, cases_path, out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(cairn::kUsage, stdout);
      return 0;
    }
    std::string* target = arg == "--template" ? &template_path
                          : arg == "--cases"  ? &cases_path
                          : arg == "--out"    ? &out_path
                                              : nullptr;
    std::string value;
    if (target == nullptr) {
      const size_t eq = arg.find('=');
      const std::string_view key = arg.substr(0, eq);
      target = key == "--template" ? &template_path
               : key == "--cases"  ? &cases_path
               : key == "--out"    ? &out_path
                                   : nullptr;
      if (target == nullptr || eq == std::string_view::npos) {
        std::fprintf(stderr, "cairn-template: unknown argument '%s'\n%s", argv[i], cairn::kUsage);
        return 1;
      }
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "cairn-template: %s needs a value\n", argv[i]);
      return 1;
    }
    *target = value;
  }
  if (template_path.empty() || cases_path.empty() || out_path.empty()) {
    std::fprintf(stderr, "cairn-template: --template, --cases and --out are required\n%s", cairn::kUsage);
    return 1;
  }
  return cairn::Run(template_path, cases_path, out_path);
}
