// Tests of chat/jinja/methods_str.cc: str's methods.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kStrMethodCases[] = {
    {"{{ s.strip() }}|{{ s.split() }}|{{ s.title() }}", "Hello World|['Hello', 'World']|  Hello World  "},
    {"{{ 'a,b,c'.split(',') }} {{ 'a b'.replace(' ', '_') }} {{ 'abc'.startswith(('x','a')) }} {{ 'abc'.endswith('bc') "
     "}} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.endswith('a', 0, 1) }}",
     "['a', 'b', 'c'] a_b True True True True"},
    {"{{ 'a-b-c'.rsplit('-', 1) }} {{ 'a b  c'.split(' ') }} {{ '  a b '.split(None, 1) }} {{ '  a b '.rsplit(None, 1) "
     "}} {{ 'a,b'.split(',', 0) }} {{ ''.split() }} {{ ''.split(',') }}",
     "['a-b', 'c'] ['a', 'b', '', 'c'] ['a', 'b '] ['  a', 'b'] ['a,b'] [] ['']"},
    {"{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('l', 3) }} {{ 'hello'.find('x') }} {{ "
     "'héllo'.find('l') }} {{ 'hello'.index('e') }}",
     "2 3 3 -1 2 1"},
    {"{{ 'hello'.index('z') }}", "ERR ValueError: substring not found"},
    {"{{ 'hello'.count('l') }} {{ 'Hello'.swapcase() }} {{ 'ab'.center(6, '*') }} {{ 'ab'.center(5) }}| {{ "
     "'ab'.ljust(4, '.') }} {{ 'ab'.rjust(4) }} {{ '5'.zfill(3) }} {{ '-5'.zfill(3) }}",
     "2 hELLO **ab**   ab | ab..   ab 005 -05"},
    {"{{ 'a.b.c'.partition('.') }} {{ 'a.b.c'.rpartition('.') }} {{ 'abc'.partition('x') }} {{ 'abc'.removeprefix('a') "
     "}} {{ 'abc'.removesuffix('c') }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }} {{ 'a\\nb'.splitlines(true) }}",
     "('a', '.', 'b.c') ('a.b', '.', 'c') ('abc', '', '') bc ab ['l1', 'l2', 'l3'] ['a\\n', 'b']"},
    {"{{ 'Hi There'.istitle() }} {{ '123'.isdigit() }} {{ ' '.isspace() }} {{ 'aB1'.isalnum() }} {{ 'ab'.isalpha() }} "
     "{{ 'ab'.islower() }} {{ 'AB'.isupper() }} {{ ''.isalpha() }} {{ '½'.isnumeric() }} {{ '½'.isdigit() }}",
     "True True True True True True True False True False"},
    {"{{ 'xxaxx'.strip('x') }} {{ 'xxaxx'.lstrip('x') }} {{ 'xxaxx'.rstrip('x') }} {{ '\\n a \\n'.strip() }} {{ "
     "'abc'.strip('cab') }}|",
     "a axx xxa a |"},
    {"{{ 'x'.join(['a', 'b']) }} {{ ''.join('abc') }}", "axb abc"},
    {"{{ ', '.join([1]) }}", "ERR TypeError: sequence item 0: expected str instance, int found"},
    {"{{ 'a'.split('') }}", "ERR ValueError: empty separator"},
    {"{{ 'abc'.center(5, 'xy') }}", "ERR TypeError: The fill character must be exactly one character long"},
    {"{{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'hello world'.capitalize() }} {{ 'ΣΑΣ'.lower() }} {{ 'ß'.upper() }}",
     "abc ABC Hello world σας SS"},
    {"{{ 'a'.nosuch() }}", "ERR UndefinedError: 'str object' has no attribute 'nosuch'"},
    {"{{ 'aXbX'.replace('X', '-', 1) }} {{ 'ab'.replace('', '.') }}", "a-bX .a.b."},
};

TEST(MethodsStrTest, StrMethodAsJinja2) { ExpectRenders(kStrMethodCases); }

}  // namespace
}  // namespace cairn::jinja
