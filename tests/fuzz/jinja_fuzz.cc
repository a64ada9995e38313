// Fuzzes the Jinja interpreter with template sources: any bytes must parse
// or fail with a status, and any template that parses must render or fail
// with a status within small limits, never crash, overflow the stack or
// hang. On success the output's provenance must be consistent: client spans
// sorted, disjoint and inside the text; marks inside the text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "chat/jinja/json.h"
#include "chat/jinja/template.h"
#include "nlohmann/json.hpp"

namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "jinja_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

bool Expected(absl::StatusCode code) {
  return code == absl::StatusCode::kOk || code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kUnimplemented || code == absl::StatusCode::kResourceExhausted;
}

const cairn::jinja::RenderInput& Input() {
  static const cairn::jinja::RenderInput* input = [] {
    auto* in = new cairn::jinja::RenderInput();
    const auto vars = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_end|>"},
                   {"role": "assistant", "content": null, "reasoning_content": "r",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
                   {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "{\"ok\": true}"}],
      "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                 "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}],
      "add_generation_prompt": true, "enable_thinking": false})");
    for (const auto& [name, value] : vars.items())
      in->variables.emplace_back(name, *cairn::jinja::FromJson(value, true));
    in->variables.emplace_back("bos_token", cairn::jinja::Value::String("<s>"));
    for (const auto& [name, value] : in->variables) {
      if (name == "messages") in->tracked = value.items();
    }
    in->now = [] { return absl::CivilSecond(2026, 1, 15, 12, 0, 0); };
    in->limits.max_steps = 200'000;
    in->limits.max_call_depth = 40;
    in->limits.max_output_bytes = 1 << 20;
    in->limits.max_time = absl::Seconds(2);
    return in;
  }();
  return *input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = cairn::jinja::Template::Create(source);
  Require(Expected(tmpl.status().code()), "parse failed with an unexpected status code");
  if (!tmpl.ok()) return 0;
  auto text = (*tmpl)->Render(Input());
  Require(Expected(text.status().code()), "render failed with an unexpected status code");
  if (!text.ok()) return 0;
  size_t end = 0;
  for (const cairn::jinja::ClientSpan& span : text->client_spans()) {
    Require(span.begin >= end && span.begin < span.end && span.end <= text->size(), "client spans out of order");
    end = span.end;
  }
  for (const cairn::jinja::ObjectMark& mark : text->marks()) {
    Require(mark.offset <= text->size() && mark.object >= 0 && mark.object < 4, "mark out of range");
  }
  return 0;
}
