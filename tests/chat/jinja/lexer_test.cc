// Tests of chat/jinja/lexer.cc: whitespace control with trim_blocks and lstrip_blocks, raw blocks, comments, literals
// and lexical errors. Expected outputs are what Jinja2 3.1 renders for the same template and variables
// (render_testing.h), in the sandbox transformers uses.
#include "chat/jinja/lexer.h"
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kWhitespaceCases[] = {
    {"a\n{% if true %}\nb\n{% endif %}\nc\n", "a\nb\nc"},
    {"a  {%+ if true %}b{% endif %}", "a  b"},
    {"  {%- if true %}x{% endif %}", "x"},
    {"x\n  {# c #}\ny", "x\ny"},
    {"x {#- c #} y", "x y"},
    {"{% if true +%}\nkeep{% endif %}", "\nkeep"},
    {"{{- '  a  ' -}}", "  a  "},
    {"  {{- 'a' }}  ", "a  "},
    {"{{ 'a' -}}\n\n b", "ab"},
    {"line1\015\nline2\015line3\n", "line1\nline2\nline3"},
    {"trailing\n\n", "trailing\n"},
    {"  {% if true %}\n  x\n  {% endif %}\n  y", "  x\n  y"},
    {"{%- if true -%}\n  x  \n{%- endif -%}   z", "xz"},
    {"{# comment #}\na\n{#- c -#}  b", "ab"},
    {"{{ 1 }}\n{{ 2 }}\n", "1\n2"},
    {"\t {% for x in [1, 2] %}\n\t{{ x }}\n\t {% endfor %}\n", "\t1\n\t2\n"},
    {"{% if true %}  \nx{% endif %}", "  \nx"},
    {"{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}"},
};

const RenderCase kRawCases[] = {
    {"{% raw %}{{ x }}{% endraw %}", "{{ x }}"},
    {"{% raw -%}  {{ x }}  {%- endraw %}", "{{ x }}"},
    {"a {%- raw %} b {% endraw -%} c", "a b c"},
    {"{% raw %}\n{% if %}\n{% endraw %}\nz", "\n{% if %}\nz"},
};

const RenderCase kLiteralCases[] = {
    {"{{ 'a\\tb\\x41\\u00e9\\U0001F600\\101\\q' }}", "a\tbAé😀A\\q"},
    {"{{ \"it's\" }} {{ 'say \"hi\"' }}", "it's say \"hi\""},
    {"{{ 'a' 'b' \"c\" }}", "abc"},
    {"{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e-7 }} {{ 12.0 }} {{ 0 }} {{ 00 }}",
     "1000 31 15 5 1500.0 1e-07 12.0 0 0"},
    {"{{ 'line\\\ncontinued' }}", "linecontinued"},
    {"{{ 1.5 }} {{ 1E2 }}", "1.5 100.0"},
};

const RenderCase kErrorCases[] = {
    {"{# unterminated", "ERR TemplateSyntaxError: Missing end of comment tag"},
    {"{% raw %} no end", "ERR TemplateSyntaxError: Missing end of raw directive"},
    {"{{ 'abc }}", "ERR TemplateSyntaxError: unexpected char \"'\" at 3"},
    {"{{ x ! y }}", "ERR TemplateSyntaxError: unexpected char '!' at 5"},
    {"{{ (1] }}", "ERR TemplateSyntaxError: unexpected ']', expected ')'"},
    {"{{ ) }}", "ERR TemplateSyntaxError: unexpected ')'"},
    {"{{ '\\x4' }}", "ERR TemplateSyntaxError: truncated \\xXX escape"},
};

TEST(LexerTest, WhitespaceAsJinja2) { ExpectRenders(kWhitespaceCases); }
TEST(LexerTest, RawAsJinja2) { ExpectRenders(kRawCases); }
TEST(LexerTest, LiteralAsJinja2) { ExpectRenders(kLiteralCases); }
TEST(LexerTest, ErrorAsJinja2) { ExpectRenders(kErrorCases); }

}  // namespace
}  // namespace cairn::jinja

namespace cairn::jinja {
namespace {

TEST(LexerTest, TokensCarryTypesTextAndLines) {
  auto tokens = Tokenize("a\r\n{{ x.y|f(1, 2.5) }}\n{% if 'q' %}b{% endif %}\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  std::vector<std::string> seen;
  for (const Token& t : *tokens)
    seen.push_back(std::to_string(static_cast<int>(t.type)) + ":" + t.text + "@" + std::to_string(t.line));
  const std::vector<std::string> expected = {"0:a\n@1", "1:@2",   "5:x@2",     "9:.@2",  "5:y@2",   "9:|@2",
                                             "5:f@2",   "9:(@2",  "7:1@2",     "9:,@2",  "8:2.5@2", "9:)@2",
                                             "2:@2",    "0:\n@2", "3:@3",      "5:if@3", "6:q@3",   "4:@3",
                                             "0:b@3",   "3:@3",   "5:endif@3", "4:@3",   "10:@3"};
  EXPECT_EQ(seen, expected);  // the trailing newline is dropped, "\r\n" is "\n"
  EXPECT_EQ((*tokens)[8].integer, 1);
  EXPECT_EQ((*tokens)[10].number, 2.5);
}

TEST(LexerTest, RefusesIntegersBeyond64Bits) {
  EXPECT_EQ(Tokenize("{{ 99999999999999999999 }}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Tokenize("{{ 9223372036854775807 }}").ok());
}

}  // namespace
}  // namespace cairn::jinja
