// Tests of chat/jinja/globals.cc: range, dict, namespace, cycler, joiner, raise_exception and strftime_now.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kGlobalCases[] = {
    {"{{ range(5) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2)|list }} {{ range(0) | list }} {{ "
     "range(true)|list }}",
     "[0, 1, 2, 3, 4] [1, 4, 7] [5, 3, 1] [] [0]"},
    {"{{ range(1, 2, 0) }}", "ERR ValueError: range() arg 3 must not be zero"},
    {"{{ range('a') }}", "ERR TypeError: 'str' object cannot be interpreted as an integer"},
    {"{{ range(200000)|length }}",
     "ERR OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
    {"{{ range(0, 200000, 2)|length }}", "100000"},
    {"{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'a': 1}, b=2) }} {{ namespace(a=1).a }} {{ namespace({'b': "
     "2}).b }}",
     "{'a': 1, 'b': 2} {'x': 1} {'a': 1, 'b': 2} 1 2"},
    {"{{ namespace(1) }}", "ERR TypeError: 'int' object is not iterable"},
    {"{{ dict(1, 2) }}", "ERR TypeError: dict expected at most 1 argument, got 2"},
    {"{{ dict([1]) }}", "ERR TypeError: cannot convert dictionary update sequence element #0 to a sequence"},
    {"{% set c = cycler('a','b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{{ c.reset() }}{{ "
     "c.current }}",
     "ababNonea"},
    {"{% set j = joiner('|') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", "a|b|c"},
    {"{% set j = joiner() %}{{ j() }}{{ j() }}", ", "},
    {"{{ raise_exception('boom') }}", "ERR TemplateError: boom"},
    {"{{ raise_exception() }}", "ERR TypeError: raise_exception() missing 1 required positional argument: 'message'"},
    {"{{ raise_exception(5) }}", "ERR TemplateError: 5"},
    {"{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%dT%H:%M:%S') }} {{ strftime_now('%A %B') }}",
     "15 Jan 2026 2026-01-15T12:00:00 Thursday January"},
};

TEST(GlobalsTest, GlobalAsJinja2) { ExpectRenders(kGlobalCases); }

}  // namespace
}  // namespace cairn::jinja
