// Tests of chat/jinja/fold.cc: Jinja2's constant folding at compile time.
// Expected outputs are what Jinja2 3.1 renders for the same template
// (render_testing.h), in the sandbox transformers uses: a folded slice goes
// through the sandbox's getitem (a miss prints empty), the same slice at run
// time is Python's own (TypeError).
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kFoldCases[] = {
    {"{{ 1 + 2 }}|{{ 'a' ~ 'b' }}|{{ [1, 2, 3][1:] }}", "3|ab|[2, 3]"},
    {"{{ {}[1:2] }}|{{ (1, 2)['a':] }}|{{ 'abc'['a':] }}|", "|||"},
    {"{% set d = {} %}{{ d[1:2] }}", "ERR TypeError: unhashable type: 'slice'"},
    {"{% set t = 'abc' %}{{ t['a':] }}",
     "ERR TypeError: slice indices must be integers or None or have an __index__ method"},
    // A failing branch that is never taken folds to nothing; an error left
    // unfolded is met at render time.
    {"{{ (1 / 0) if false else 'ok' }}", "ok"},
    {"{{ 5 // 0 }}", "ERR ZeroDivisionError: integer division or modulo by zero"},
    {"{{ [3, 1, 2]|sort|first }} {{ 'x'|upper }} {{ 3 is odd }}", "1 X True"},
    {"{{ {'a': 1}.items()[0] }}|", "|"},
};

TEST(FoldTest, ConstantsFoldAsJinja2) { ExpectRenders(kFoldCases); }

}  // namespace
}  // namespace cairn::jinja
