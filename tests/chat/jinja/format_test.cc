// Tests of chat/jinja/format.cc: printf-style % formatting and str.format.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kPercentCases[] = {
    {"{{ '%s and %d' % ('a', 3) }}", "a and 3"},
    {"{{ '%5.2f|%-5d|%+d|%05d|%e|%g|%r|%%' % (3.14159, 42, 5, 42, 12345.678, 0.0001, 'x') }}",
     " 3.14|42   |+5|00042|1.234568e+04|0.0001|'x'|%"},
    {"{{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }}", "x-2"},
    {"{{ '%s' % (1, 2) }}", "ERR TypeError: not all arguments converted during string formatting"},
    {"{{ '%s %s' % (1,) }}", "ERR TypeError: not enough arguments for format string"},
    {"{{ '%d' % 'x' }}", "ERR TypeError: %d format: a real number is required, not str"},
    {"{{ '%x %X %o %c %c' % (255, 255, 8, 65, 'z') }}", "ff FF 10 A z"},
    {"{{ '%s' % none }} {{ '%s' % [1] }} {{ '%i' % 3.7 }} {{ '%.3s' % 'abcdef' }} {{ '%*d' % (5, 1) }}",
     "None [1] 3 abc     1"},
    {"{{ '%(a)s' % 1 }}", "ERR TypeError: format requires a mapping"},
    {"{{ '%-6s|' % 'ab' }}", "ab    |"},
    {"{{ 'abc' % () }}", "abc"},
    {"{{ 'abc' % 5 }}", "ERR TypeError: not all arguments converted during string formatting"},
    {"{{ 'x%qx' % 1 }}", "ERR ValueError: unsupported format character 'q' (0x71) at index 2"},
};

const RenderCase kStrFormatCases[] = {
    {"{{ '{} and {}'.format('x', 1) }}", "x and 1"},
    {"{{ '{:>5}|{:<5}|{:^5}|{:05d}|{:.2f}|{!r}'.format('a', 'b', 'c', 42, 3.14159, 'q') }}",
     "    a|b    |  c  |00042|3.14|'q'"},
    {"{{ '{0}{1}{0}'.format('a', 'b') }}", "aba"},
    {"{{ '{a} {b.x} {c[0]}'.format(a=1, b={'x': 2}, c=[3]) }}", "1 2 3"},
    {"{{ '{{}} {}'.format(1) }}", "{} 1"},
    {"{{ '{:*^9}'.format('mid') }} {{ '{:+d}'.format(5) }} {{ '{:x}'.format(255) }} {{ '{:%}'.format(0.25) }} {{ "
     "'{:e}'.format(1234.5) }}",
     "***mid*** +5 ff 25.000000% 1.234500e+03"},
    {"{{ '{}'.format() }}", "ERR IndexError: tuple index out of range"},
    {"{{ '{0} {}'.format(1, 2) }}",
     "ERR ValueError: cannot switch from manual field specification to automatic field numbering"},
    {"{{ '{z}'.format(a=1) }}", "ERR KeyError: 'z'"},
    {"{{ '}'.format() }}", "ERR ValueError: Single '}' encountered in format string"},
};

TEST(FormatTest, PercentAsJinja2) { ExpectRenders(kPercentCases); }
TEST(FormatTest, StrFormatAsJinja2) { ExpectRenders(kStrFormatCases); }

}  // namespace
}  // namespace cairn::jinja
