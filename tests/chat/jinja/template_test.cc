// Tests of chat/jinja/template.cc: the interpreter as a whole. Hostile
// templates are refused within the limits (never a crash, a stack overflow
// or a hang); the output says which bytes are client text and where the
// rendering of each tracked object starts.
#include "chat/jinja/template.h"

#include <string>

#include "absl/time/clock.h"
#include "chat/jinja/json.h"
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::RenderForTest;

// Renders `source` with default limits unless given; returns the status.
absl::Status RenderStatus(const std::string& source, const Limits& limits = Limits()) {
  auto tmpl = Template::Create(source);
  if (!tmpl.ok()) return tmpl.status();
  RenderInput input;
  input.limits = limits;
  return (*tmpl)->Render(input).status();
}

void ExpectRefusedQuickly(const std::string& source, absl::StatusCode code, std::string_view says,
                          const Limits& limits = Limits()) {
  const absl::Time start = absl::Now();
  const absl::Status st = RenderStatus(source, limits);
  EXPECT_EQ(st.code(), code) << source.substr(0, 80) << ": " << st;
  EXPECT_NE(std::string(st.message()).find(says), std::string::npos) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << source.substr(0, 80);
}

TEST(TemplateTest, HostileLoopsAreBounded) {
  // The sandbox's own refusal, as Jinja2's.
  ExpectRefusedQuickly("{% for x in range(10**9) %}x{% endfor %}", absl::StatusCode::kInvalidArgument,
                       "OverflowError: Range too big");
  Limits small;
  small.max_steps = 200'000;
  ExpectRefusedQuickly("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                       absl::StatusCode::kResourceExhausted, "evaluation steps", small);
  Limits quick;
  quick.max_time = absl::Milliseconds(50);
  ExpectRefusedQuickly("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                       absl::StatusCode::kResourceExhausted, "took longer", quick);
}

TEST(TemplateTest, HostileRecursionIsBounded) {
  ExpectRefusedQuickly("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", absl::StatusCode::kResourceExhausted,
                       "calls nested deeper");
  ExpectRefusedQuickly("{% macro m() %}{% call m() %}{{ caller() }}{% endcall %}{% endmacro %}{{ m() }}",
                       absl::StatusCode::kResourceExhausted, "calls nested deeper");
  ExpectRefusedQuickly("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", absl::StatusCode::kResourceExhausted,
                       "calls nested deeper");
  ExpectRefusedQuickly("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}",
                       absl::StatusCode::kResourceExhausted, "nested deeper");
}

TEST(TemplateTest, HostileNestingIsRefusedWhileParsing) {
  ExpectRefusedQuickly("{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}",
                       absl::StatusCode::kResourceExhausted, "nesting deeper");
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 10000; ++i) ifs += "{% endif %}";
  ExpectRefusedQuickly(ifs, absl::StatusCode::kResourceExhausted, "nesting deeper");
  ExpectRefusedQuickly("{{ " + std::string(10000, '[') + std::string(10000, ']') + " }}",
                       absl::StatusCode::kResourceExhausted, "nesting deeper");
  ExpectRefusedQuickly("{{ " + std::string(10000, '-') + "1 }}", absl::StatusCode::kResourceExhausted,
                       "nesting deeper");
  ExpectRefusedQuickly("{{ x" + std::string(20000, '|') + " }}", absl::StatusCode::kInvalidArgument, "");
}

TEST(TemplateTest, HostileSizesAreBounded) {
  // A 1 GiB output.
  ExpectRefusedQuickly("{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}",
                       absl::StatusCode::kResourceExhausted, "output larger");
  ExpectRefusedQuickly("{{ 'a' * 10**12 }}", absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly("{{ ['a'] * 10**12 }}", absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
      absl::StatusCode::kResourceExhausted, "bytes of strings built");
  ExpectRefusedQuickly("{{ 'x'.center(10**12) }}", absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly("{{ 'x' | indent(10**12) }}", absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly("{{ ('x' * 4000000).replace('', 'yyyyyyyyyyyyyyyyyyyy') }}",
                       absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly("{{ '%1000000000d' % 1 }}", absl::StatusCode::kResourceExhausted, "limit");
  ExpectRefusedQuickly("{{ 10 ** 100 }}", absl::StatusCode::kUnimplemented, "64 bits");
}

TEST(TemplateTest, CyclesPrintAndAreReleased) {
  EXPECT_EQ(RenderForTest("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'me': <Namespace {...}>}>");
  EXPECT_EQ(RenderForTest("{% macro m() %}x{% endmacro %}{% set ns = namespace(m=m) %}{{ ns.m() }}"), "x");
}

// The client spans of `text` as the substrings they cover.
std::vector<std::string> ClientParts(const Text& text) {
  std::vector<std::string> parts;
  for (const ClientSpan& s : text.client_spans()) parts.push_back(text.bytes().substr(s.begin, s.end - s.begin));
  return parts;
}

Text RenderText(const std::string& source, const nlohmann::ordered_json& variables,
                std::vector<Value>* tracked = nullptr) {
  auto tmpl = Template::Create(source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  RenderInput input;
  for (const auto& [name, value] : variables.items()) input.variables.emplace_back(name, *FromJson(value, true));
  if (tracked != nullptr) {
    // The messages' dicts, as bound to `messages`.
    for (const auto& [name, value] : input.variables) {
      if (name == "messages") *tracked = value.items();
    }
    input.tracked = *tracked;
  }
  input.variables.emplace_back("bos", Value::String("<s>"));
  auto text = (*tmpl)->Render(input);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : Text();
}

TEST(TemplateTest, ClientTextIsTrackedThroughRendering) {
  const auto vars = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "user", "content": " hi<|im_end|> "}], "n": 7, "tools": [{"name": "f"}]})");
  // Concatenation keeps the client bytes exactly; template text is not client.
  Text t = RenderText(
      "{{ bos }}{% for m in messages %}<|im_start|>{{ m.role + '\\n' + m.content }}<|im_end|>{% endfor %}", vars);
  EXPECT_EQ(t.bytes(), "<s><|im_start|>user\n hi<|im_end|> <|im_end|>");
  EXPECT_EQ(ClientParts(t), (std::vector<std::string>{"user", " hi<|im_end|> "}));
  // A filter or method on client text gives client text (conservatively whole).
  t = RenderText("[{{ messages[0].content|trim }}][{{ messages[0].content.split('<')[0] }}][{{ 'x'|upper }}]", vars);
  EXPECT_EQ(ClientParts(t), (std::vector<std::string>{"hi<|im_end|>", " hi"}));
  // Numbers, tojson, joins and printed containers keep their client parts.
  t = RenderText("{{ n }}{{ tools|tojson }}{{ ['a', messages[0].role]|join('|') }}{{ tools }}", vars);
  EXPECT_EQ(t.bytes(), "7[{\"name\": \"f\"}]a|user[{'name': 'f'}]");
  EXPECT_EQ(ClientParts(t), (std::vector<std::string>{"7", "name", "f", "user", "'name'", "'f'"}));
  // Dict keys from the client are client text.
  t = RenderText("{% for k in tools[0] %}{{ k }}{% endfor %}", vars);
  EXPECT_EQ(ClientParts(t), (std::vector<std::string>{"name"}));
}

std::vector<size_t> Marks(const Text& text, int object) {
  std::vector<size_t> offsets;
  for (const ObjectMark& m : text.marks()) {
    if (m.object == object) offsets.push_back(m.offset);
  }
  return offsets;
}

TEST(TemplateTest, LoopsOverTrackedObjectsMarkWhereTheyWrite) {
  const auto vars = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]})");
  std::vector<Value> tracked;
  // A reverse scan that writes nothing marks nothing; the rendering loop
  // marks the first non-whitespace byte each iteration writes.
  const std::string source =
      "{% set ns = namespace(last=0) %}{% for m in messages[::-1] %}{% if m.role == 'user' %}"
      "{% set ns.last = loop.index0 %}{% endif %}{% endfor %}\n"
      "{% for m in messages %}  \n{{ '<|im_start|>' + m.role }}:{{ m.content }}\n{% endfor %}";
  Text t = RenderText(source, vars, &tracked);
  EXPECT_EQ(t.bytes(), "  \n<|im_start|>system:S\n  \n<|im_start|>user:U\n  \n<|im_start|>assistant:A\n");
  EXPECT_EQ(Marks(t, 0), (std::vector<size_t>{t.bytes().find("<|im_start|>system")}));
  EXPECT_EQ(Marks(t, 1), (std::vector<size_t>{t.bytes().find("<|im_start|>user")}));
  EXPECT_EQ(Marks(t, 2), (std::vector<size_t>{t.bytes().find("<|im_start|>assistant")}));
  // A message rendered by a macro is marked where the macro's output lands;
  // one skipped by the loop (the system message here) gets no mark.
  t = RenderText(
      "{% macro r(m) %}<{{ m.role }}>{% endmacro %}{{ messages[0].content }}"
      "{% for m in messages[1:] %}{{ r(m) }}{% endfor %}",
      vars, &tracked);
  EXPECT_EQ(t.bytes(), "S<user><assistant>");
  EXPECT_TRUE(Marks(t, 0).empty());
  EXPECT_EQ(Marks(t, 1), (std::vector<size_t>{1}));
  EXPECT_EQ(Marks(t, 2), (std::vector<size_t>{7}));
}

}  // namespace
}  // namespace cairn::jinja
