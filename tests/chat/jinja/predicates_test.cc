// Tests of chat/jinja/predicates.cc: Jinja2's tests.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kTestCases[] = {
    {"{{ 5 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 3 is ge 2 }} {{ none is sameas none }} {{ 3 is lt 2 "
     "}} {{ 3 is ne 3 }} {{ 2 is greaterthan 1 }} {{ 1 is lessthan 2 }} {{ 1 is == 1 }}",
     "ERR TemplateSyntaxError: expected token 'name', got '=='"},
    {"{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'x' is in 'xyz' }} {{ range is callable }} {{ 'x' is callable }} {{ "
     "'upper' is filter }} {{ 'odd' is test }} {{ 'nosuch' is filter }}",
     "True True True True False True True False"},
    {"{{ 'abc' is sequence }} {{ {} is sequence }} {{ x is sequence }} {{ x is iterable }} {{ 5 is iterable }} {{ "
     "[1]|map('string') is sequence }} {{ [1]|map('string') is iterable }} {{ none is sequence }}",
     "True True True True False False True False"},
    {"{{ 3 is number }} {{ true is number }} {{ 3.0 is integer }} {{ 3 is integer }} {{ true is integer }} {{ 2.0 is "
     "float }} {{ true is boolean }} {{ none is false }} {{ false is false }} {{ true is true }} {{ 1 is true }}",
     "True True False True False True True False True True False"},
    {"{{ x is defined }} {{ d.a is defined }} {{ none is none }} {{ 'a' is string }} {{ d is mapping }} {{ e is "
     "iterable }} {{ x is mapping }} {{ x is string }} {{ none is mapping }} {{ 'a'|e is escaped }} {{ 'a' is escaped "
     "}}",
     "False True True True True True False False False True False"},
    {"{{ 'x' is odd }}", "ERR TypeError: not all arguments converted during string formatting"},
    {"{{ x is odd }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ 3 is divisibleby 0 }}", "ERR ZeroDivisionError: integer modulo by zero"},
};

TEST(PredicatesTest, TestAsJinja2) { ExpectRenders(kTestCases); }

}  // namespace
}  // namespace cairn::jinja
