// Tests of chat/jinja/eval.cc: expressions and Undefined semantics.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kExpressionCases[] = {
    {"{{ 1 + 2 }}", "3"},
    {"{{ 'a' ~ 1 ~ none ~ true }}", "a1NoneTrue"},
    {"{{ true and 'x' }} {{ false or 'y' }} {{ none or [] or 0 }} {{ not none }}", "x y 0 True"},
    {"{{ 1 if none else 2 }}", "2"},
    {"{{ 'a' if 'b' in 'abc' else 'c' }}", "a"},
    {"{{ d }} {{ d.b }} {{ d['c'].x }} {{ d.zz }}|{{ d.zz is defined }}",
     "{'a': 1, 'b': [1, 2.5, None, True], 'c': {'x': 'y'}} [1, 2.5, None, True] y |False"},
    {"{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ (1,) }} {{ ('a', 2) }}",
     "[1, 'a', None, True, 1.5, {'k': 'v'}] (1,) ('a', 2)"},
    {"{{ {'a': 1}['a'] }} {{ {1: 'x'}[1] }} {{ {1.0: 'y'}[1] }} {{ {true: 't'}[1] }}", "1 x y t"},
    {"{{ [1, 2, 3][1:] }} {{ [1,2,3][::2] }} {{ [1,2,3][5:] }} {{ 'hello'[1:4] }} {{ 'hello'[-3:] }} {{ [1,2,3][::-1] "
     "}} {{ 'abc'[None:2] }}",
     "[2, 3] [1, 3] [] ell llo [3, 2, 1] ab"},
    {"{{ [1,2,3][1:2:0] }}", "ERR ValueError: slice step cannot be zero"},
    {"{{ messages[-1].reasoning_content }} {{ messages[0].reasoning_content is defined }}", "think False"},
    {"{{ messages|length }} {{ messages[1].content }}", "3 Hi <b>&'\" 日本"},
};

const RenderCase kUndefinedCases[] = {
    {"{{ x }}|{{ x is defined }}|{{ x is undefined }}", "|False|True"},
    {"{{ x.y }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ d.zz.y }}", "ERR UndefinedError: 'dict object' has no attribute 'zz'"},
    {"{{ x.y is defined }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ loop }}", ""},
    {"{{ none.x }}", ""},
    {"{{ 'abc'.x }}", ""},
    {"{{ [1][5] }}", ""},
    {"{{ [1].x }}", ""},
    {"{{ (1, 2)[3] }}", ""},
    {"{{ x + 1 }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ x ~ 'a' }}", "a"},
    {"{{ -x }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ x[0] }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ x() }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ 1 == x }} {{ x == y }} {{ x != 1 }}", "False True True"},
    {"{{ x < 1 }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ not x }}", "True"},
    {"{% if x %}a{% else %}b{% endif %}", "b"},
    {"{{ 'x' in x }}", "False"},
    {"{{ (e|first).x }}", "ERR UndefinedError: No first item, sequence was empty."},
    {"{{ e|first }}", ""},
    {"{{ 1 if false }}|", "|"},
    {"{{ (1 if false).x }}",
     "ERR UndefinedError: the inline if-expression on line 1 evaluated to false and no else section was defined."},
    {"{{ d.zz|default('fallback') }}", "fallback"},
};

TEST(EvalTest, ExpressionAsJinja2) { ExpectRenders(kExpressionCases); }
TEST(EvalTest, UndefinedAsJinja2) { ExpectRenders(kUndefinedCases); }

}  // namespace
}  // namespace cairn::jinja
