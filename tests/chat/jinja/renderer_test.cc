// Tests of chat/jinja/renderer.cc: control flow, loops and loop variables, scoping, macros and callers, block set,
// filter blocks and generation. Expected outputs are what Jinja2 3.1 renders for the same template and variables
// (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kControlCases[] = {
    {"{% for m in messages %}{{ loop.index }}:{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}",
     "1:system,2:user,3:assistant"},
    {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
    {"{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}e{% endfor %}", "1/22/2"},
    {"{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }}-{{ loop.cycle('a','b') }};{% "
     "endfor %}",
     "-2-3-a;1-3-2-b;2--1-a;"},
    {"{% for i in range(10) %}{% if i == 3 %}{% continue %}{% endif %}{% if i == 6 %}{% break %}{% endif %}{{ i }}{% "
     "endfor %}",
     "01245"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=[1, 2.5, None, True];c={'x': 'y'};"},
    {"{% for x in [1,2,3] if x > 1 %}{{ loop.first }}{{ loop.last }}{% endfor %}", "TrueFalseFalseTrue"},
    {"{% for i in [3,1] %}{% for j in [1] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}", "1112"},
    {"{% for a in [[1,[2,3]]] recursive %}{% if a is iterable %}[{{ loop(a) }}]{% else %}{{ a }}{{ loop.depth }}{% "
     "endif %}{% endfor %}",
     "[12[2333]]"},
    {"{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}", "TrueFalseTrue"},
    {"{% for x in range(3) %}{{ loop.revindex0 }}{{ loop.depth0 }}{% endfor %}", "201000"},
    {"{% for x in [1,2] %}{{ loop|length }}{% endfor %}", "22"},
    {"{% for c in 'héllo' %}{{ c }}.{% endfor %}", "h.é.l.l.o."},
    {"{% set ns = namespace(found=false) %}{% for x in [1,2,3] if not ns.found %}{{ x }}{% if x == 2 %}{% set ns.found "
     "= true %}{% endif %}{% endfor %}",
     "12"},
    {"{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}", "1234"},
    {"{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}", "123"},
    {"{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c"},
    {"{% for x in [1, 2] %}{% for y in [1, 2] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% "
     "endfor %}",
     "1121"},
    {"{% for a, b in [[1,2,3]] %}{% endfor %}", "ERR ValueError: too many values to unpack (expected 2)"},
    {"{% for a, b in [[1]] %}{% endfor %}", "ERR ValueError: not enough values to unpack (expected 2, got 1)"},
    {"{% for x in none %}{% endfor %}", "ERR TypeError: 'NoneType' object is not iterable"},
    {"{% for x in 5 %}{% endfor %}", "ERR TypeError: 'int' object is not iterable"},
    {"{% for x in undefinedthing %}x{% else %}none{% endfor %}", "none"},
};

const RenderCase kScopeCases[] = {
    {"{% set x = 1 %}{% for i in range(3) %}[{{ x }}{% set x = i %}{{ x }}]{% endfor %}{{x}}", "[10][11][12]1"},
    {"{% for i in range(2) %}{% set z = i %}{% endfor %}[{{ z }}]", "[]"},
    {"{% if true %}{% set w = 3 %}{% endif %}{{ w }}", "3"},
    {"{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", "2"},
    {"{% macro m() %}{{ i }}{% endmacro %}{% for i in range(2) %}[{{ m() }}]{% endfor %}", "[][]"},
    {"{% for i in range(2) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}", "01"},
    {"{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns }}",
     "4 <Namespace {'a': 4}>"},
    {"{% set a = 1 %}{% macro m(a) %}{% set a = a + 1 %}{{ a }}{% endmacro %}{{ m(5) }}{{ a }}", "61"},
    {"{% set y = 0 %}{% for i in range(3) %}{% if i == 1 %}{% set y = 7 %}{% endif %}{{ y }}{% endfor %}", "070"},
    {"{% with a = 1 %}{{ a }}{% set b = 2 %}{% endwith %}[{{ a }}{{ b }}]", "1[]"},
    {"{% set a = 5 %}{% with a = 1, b = a %}{{ b }}{% endwith %}", "5"},
    {"{% set x = 5 %}{% macro m() %}{% set x = x + 1 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}", "65"},
    {"{% set t %}{% set inner = 1 %}{% endset %}[{{ inner }}]", "[]"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}", "12"},
    {"{% set x.y = 1 %}", "ERR TemplateRuntimeError: cannot assign attribute on non-namespace object"},
    {"{% set ns = [] %}{% set ns.a = 1 %}",
     "ERR TemplateRuntimeError: cannot assign attribute on non-namespace object"},
    {"{% set x = [1, 2] %}{% set y = x + [3] %}{{ x }}{{ y }}", "[1, 2][1, 2, 3]"},
};

const RenderCase kMacroCases[] = {
    {"{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=3) }} {{ m(b=4, a=0) }}", "1-2 1-3 0-4"},
    {"{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", "(2, 3){'k': 4}"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
     "ERR TypeError: macro 'm' takes not more than 1 argument(s)"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}", "ERR TypeError: macro 'm' takes no keyword argument 'b'"},
    {"{% macro m(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}", "[1|]"},
    {"{% macro m(a, b=a) %}{{ b }}{% endmacro %}{{ m(7) }}", "7"},
    {"{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}", "ERR UndefinedError: No caller defined"},
    {"{% macro m() %}{% set q = 1 %}{{ caller(q) }}{% endmacro %}{% call(v) m() %}[{{ v }}]{% endcall %}", "[1]"},
    {"{% macro m(x) %}<{{ caller() }}{{ x }}>{% endmacro %}{% call m(1) %}body{% endcall %}", "<body1>"},
    {"{% macro outer() %}{% macro inner() %}in{% endmacro %}{{ inner() }}{% endmacro %}{{ outer() }}", "in"},
    {"{% macro m() %}{{ m.name }}{% endmacro %}{{ m() }}", "m"},
    {"{% macro m() %}x{% endmacro %}{{ m }}", "<Macro 'm'>"},
    {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}", "4321"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, a=2) }}", "ERR TypeError: macro 'm' takes no keyword argument 'a'"},
};

const RenderCase kBlockCases[] = {
    {"{% set t %}hello {{ 1 }}{% endset %}[{{ t }}]", "[hello 1]"},
    {"{% set t | upper %}hello{% endset %}[{{ t }}]", "[HELLO]"},
    {"{% set t | trim | upper %} hi {% endset %}[{{ t }}]", "[HI]"},
    {"{% filter upper %}abc{% endfilter %}", "ABC"},
    {"{% filter replace('a', 'b')|upper %}aaa{% endfilter %}", "BBB"},
    {"{% set a = 'x' %}{% filter upper %}{{ a }}{% set b = 1 %}{% endfilter %}{{ b }}", "X"},
    {"{% generation %}gen {{ 1 }}{% endgeneration %}", "gen 1"},
    {"{% generation %}{% set q = 1 %}{% endgeneration %}[{{ q }}]", "[]"},
    {"{% for i in range(2) %}{% generation %}{{ i }}{% endgeneration %}{% endfor %}", "01"},
};

TEST(RendererTest, ControlAsJinja2) { ExpectRenders(kControlCases); }
TEST(RendererTest, ScopeAsJinja2) { ExpectRenders(kScopeCases); }
TEST(RendererTest, MacroAsJinja2) { ExpectRenders(kMacroCases); }
TEST(RendererTest, BlockAsJinja2) { ExpectRenders(kBlockCases); }

}  // namespace
}  // namespace cairn::jinja
