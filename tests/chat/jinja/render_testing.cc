#include "tests/chat/jinja/render_testing.h"

#include "chat/jinja/json.h"

namespace cairn::jinja::testing {

const nlohmann::ordered_json& TestVariables() {
  static const auto* vars = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"json({
    "messages": [{"role": "system", "content": "  Sys prompt.\n"},
                 {"role": "user", "content": "Hi <b>&'\" 日本"},
                 {"role": "assistant", "content": "Hello", "reasoning_content": "think"}],
    "d": {"a": 1, "b": [1, 2.5, null, true], "c": {"x": "y"}},
    "s": "  Hello World  ", "n": 5, "f": 2.5, "e": [], "none": null,
    "tools": [{"type": "function", "function": {"name": "f", "description": "desc",
               "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}]
  })json"));
  return *vars;
}

std::string RenderForTest(std::string_view source, const nlohmann::ordered_json& variables, const Limits& limits) {
  auto tmpl = Template::Create(source);
  if (!tmpl.ok()) return "ERR " + std::string(tmpl.status().message());
  RenderInput input;
  for (const auto& [name, value] : variables.items()) {
    auto v = FromJson(value, true);
    if (!v.ok()) return "ERR " + std::string(v.status().message());
    input.variables.emplace_back(name, *std::move(v));
  }
  input.now = [] { return absl::CivilSecond(2026, 1, 15, 12, 0, 0); };
  input.limits = limits;
  auto text = (*tmpl)->Render(input);
  if (!text.ok()) return "ERR " + std::string(text.status().message());
  return text->bytes();
}

}  // namespace cairn::jinja::testing
