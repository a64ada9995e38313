// Tests of chat/jinja/methods.cc: list, tuple and dict methods and the sandbox refusing the ones that modify.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kCollectionMethodCases[] = {
    {"{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ "
     "d.items()|list }}",
     "1 None 5 ['a', 'b', 'c'] [1, [1, 2.5, None, True], {'x': 'y'}] [('a', 1), ('b', [1, 2.5, None, True]), ('c', "
     "{'x': 'y'})]"},
    {"{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ (1, 2).index(1) }}", "2 1 0"},
    {"{{ [1].index(5) }}", "ERR ValueError: 5 is not in list"},
    {"{{ d.copy() }} {{ [1].copy() }}", "{'a': 1, 'b': [1, 2.5, None, True], 'c': {'x': 'y'}} [1]"},
    {"{{ d.get([1]) }}", "ERR TypeError: unhashable type: 'list'"},
    {"{{ [].append }}|{{ [].pop() }}", "ERR SecurityError: access to attribute 'pop' of 'list' object is unsafe."},
    {"{{ [].append(1) }}", "ERR SecurityError: access to attribute 'append' of 'list' object is unsafe."},
    {"{{ {}.update({}) }}", "ERR SecurityError: access to attribute 'update' of 'dict' object is unsafe."},
    {"{{ {}.pop }}|{{ {}.setdefault('a') }}",
     "ERR SecurityError: access to attribute 'setdefault' of 'dict' object is unsafe."},
    {"{{ (1,).append }}|{{ (1,).count(1) }}", "|1"},
    {"{{ d.nosuch }}|{{ d.items is callable }}", "|True"},
};

TEST(MethodsTest, CollectionMethodAsJinja2) { ExpectRenders(kCollectionMethodCases); }

}  // namespace
}  // namespace cairn::jinja
