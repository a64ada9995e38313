// Tests of chat/jinja/access.cc: the immutable sandbox's attribute and item access.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kSandboxCases[] = {
    {"{{ ''.__class__ }}", ""},
    {"{{ messages.__len__() }}", "ERR SecurityError: access to attribute '__len__' of 'list' object is unsafe."},
    {"{{ d.__class__ }}|", "|"},
    {"{{ d._private }}|{{ d['_private'] }}|", "||"},
    {"{{ ns._x }}", "ERR UndefinedError: 'ns' is undefined"},
    {"{{ range.__name__ }}", ""},
    {"{{ d['items'] is defined }} {{ d['nosuch'] is defined }} {{ d.get is callable }}", "True False True"},
    {"{{ messages[0].role }} {{ messages[0]['role'] }} {{ messages.0['content']|trim }}", "system system Sys prompt."},
    {"{{ [1, 2][true] }} {{ 'abc'[-1] }} {{ 'abc'[10] }}|{{ [1][1.5] }}|", "2 c ||"},
    {"{{ none[0] }}|{{ none['x'] }}|{{ 5.x }}|", "|||"},
};

TEST(AccessTest, SandboxAsJinja2) { ExpectRenders(kSandboxCases); }

}  // namespace
}  // namespace cairn::jinja
