// Tests of chat/jinja/parser.cc and parser_expr.cc: the grammar (precedence, tuples, tests, filters, calls), syntax
// errors and the soft frames where unknown filters fail only when run. Expected outputs are what Jinja2 3.1 renders for
// the same template and variables (render_testing.h), in the sandbox transformers uses.
#include "chat/jinja/template.h"
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kSyntaxErrorCases[] = {
    {"{% if %}", "ERR TemplateSyntaxError: Expected an expression, got 'end of statement block'"},
    {"{% if x %}",
     "ERR TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' "
     "or 'endif'. The innermost block that needs to be closed is 'if'."},
    {"{% for x in y %}{% endif %}",
     "ERR TemplateSyntaxError: Encountered unknown tag 'endif'. Jinja was looking for the following tags: 'endfor' or "
     "'else'. The innermost block that needs to be closed is 'for'."},
    {"{% endfor %}", "ERR TemplateSyntaxError: Encountered unknown tag 'endfor'."},
    {"{{ }}", "ERR TemplateSyntaxError: Expected an expression, got 'end of print statement'"},
    {"{{ x", "ERR TemplateSyntaxError: unexpected end of template, expected 'end of print statement'."},
    {"{{ 1 + }}", "ERR TemplateSyntaxError: unexpected 'end of print statement'"},
    {"{% foo %}", "ERR TemplateSyntaxError: Encountered unknown tag 'foo'."},
    {"{% break %}", "ERR SyntaxError: 'break' outside loop"},
    {"{% macro m(a=1, b) %}{% endmacro %}", "ERR TemplateSyntaxError: non-default argument follows default argument"},
    {"{{ x|nosuch }}", "ERR TemplateAssertionError: No filter named 'nosuch'."},
    {"{{ x is nosuch }}", "ERR TemplateAssertionError: No test named 'nosuch'."},
    {"{% set 1 = 2 %}", "ERR TemplateSyntaxError: can't assign to 'const'"},
    {"{% do x %}", "ERR TemplateSyntaxError: Encountered unknown tag 'do'."},
    {"{% for x in y %}",
     "ERR TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: 'endfor' or "
     "'else'. The innermost block that needs to be closed is 'for'."},
    {"{% if x %}{% else %}{% else %}{% endif %}",
     "ERR TemplateSyntaxError: Encountered unknown tag 'else'. Jinja was looking for the following tags: 'endif'. The "
     "innermost block that needs to be closed is 'if'."},
    {"{{ x is defined is defined }}", "ERR TemplateSyntaxError: You cannot chain multiple tests with is"},
    {"{% call m %}{% endcall %}", "ERR TemplateSyntaxError: expected call"},
    {"{{ a.(b) }}", "ERR TemplateSyntaxError: expected name or number"},
};

const RenderCase kGrammarCases[] = {
    {"{{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ -1|abs }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1 ~ 2 + 3 }}",
     "ERR TypeError: can only concatenate str (not \"int\") to str"},
    {"{{ not 1 == 2 }} {{ not true and false }} {{ true or false and false }}", "True False True"},
    {"{{ 1 if false }}|{{ 1 if true else 2 }}|{{ 1 if false else 2 if false else 3 }}", "|1|3"},
    {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'abc' }} {{ 2 not in [1] }}", "True False True True"},
    {"{{ 1, 2 }}", "(1, 2)"},
    {"{% set a = 1, 2 %}{{ a }}", "(1, 2)"},
    {"{{ () }} {{ (1) }} {{ (1,) }} {{ [] }} {{ {} }} {{ [1, 2,] }} {{ {'a': 1,} }}",
     "() 1 (1,) [] {} [1, 2] {'a': 1}"},
    {"{% print 1, 'a' %}", "1a"},
    {"{{ messages.0.role }} {{ messages[1]['role'] }} {{ d.c.x }}", "system user y"},
    {"{{ 5 is divisibleby 3 }} {{ 6 is divisibleby(3) }} {{ none is sameas none }} {{ x is not defined }}",
     "False True True True"},
    {"{{ 'a'|upper|lower }} {{ ('a' ~ 'b')|upper }} {{ 'abc'|replace('b', 'x')|upper }}", "a AB AXC"},
    {"{{ [1, 2]|join(',') ~ '!' }}", "1,2!"},
    {"{{ dict(**{'a': 1}) }} {{ range(*[1, 3])|list }}", "{'a': 1} [1, 2]"},
    {"{% if false %}{{ x|nosuch }}{% endif %}ok", "ok"},
    {"{{ x|nosuch if false else 1 }}", "1"},
    {"{% if true %}{{ x|nosuch }}{% endif %}", "ERR TemplateRuntimeError: No filter named 'nosuch' found."},
    {"{% macro m() %}{% if false %}{{ x|nosuch }}{% endif %}{% endmacro %}ok", "ok"},
};

TEST(ParserTest, SyntaxErrorAsJinja2) { ExpectRenders(kSyntaxErrorCases); }
TEST(ParserTest, GrammarAsJinja2) { ExpectRenders(kGrammarCases); }

}  // namespace
}  // namespace cairn::jinja

namespace cairn::jinja {
namespace {

TEST(ParserTest, LoadingOtherTemplatesIsUnimplemented) {
  for (const char* source :
       {"{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}", "{% from 'x' import y %}",
        "{% block b %}{% endblock %}", "{% autoescape true %}{% endautoescape %}"}) {
    EXPECT_EQ(Template::Create(source).status().code(), absl::StatusCode::kUnimplemented) << source;
  }
  EXPECT_EQ(Template::Create("{{ x|random }}").status().code(), absl::StatusCode::kUnimplemented);
  // Inside an if, only a render that reaches it fails.
  EXPECT_TRUE(Template::Create("{% if false %}{{ x|random }}{% endif %}").ok());
}

}  // namespace
}  // namespace cairn::jinja
