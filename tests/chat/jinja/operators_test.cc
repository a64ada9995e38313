// Tests of chat/jinja/operators.cc: Python's arithmetic, sequence operators, comparisons and membership, with Python's
// errors. Expected outputs are what Jinja2 3.1 renders for the same template and variables (render_testing.h), in the
// sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kArithmeticCases[] = {
    {"{{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 1 / 3 }} {{ 1e20 }} {{ 1e16 }} {{1e15}} "
     "{{ 0.0001 }} {{ 0.00001 }}",
     "64 3 -4 2 3.5 0.3333333333333333 1e+20 1e+16 1000000000000000.0 0.0001 1e-05"},
    {"{{ 7 % -3 }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ 2 ** -1 }} {{ 2 ** 0.5 }}", "-2 -4.0 1.5 0.5 1.4142135623730951"},
    {"{{ 0.1 + 0.2 }} {{ 2**62 }} {{ true + true }} {{ 3 * 1.5 }} {{ -(3) }} {{ +3 }}",
     "0.30000000000000004 4611686018427387904 2 4.5 -3 3"},
    {"{{ 10 / 0 }}", "ERR ZeroDivisionError: division by zero"},
    {"{{ 10 // 0 }}", "ERR ZeroDivisionError: integer division or modulo by zero"},
    {"{{ 10 % 0 }}", "ERR ZeroDivisionError: integer modulo by zero"},
    {"{{ 10.0 // 0 }}", "ERR ZeroDivisionError: float floor division by zero"},
    {"{{ 0 ** -1 }}", "ERR ZeroDivisionError: 0.0 cannot be raised to a negative power"},
    {"{{ -'a' }}", "ERR TypeError: bad operand type for unary -: 'str'"},
    {"{{ 'a' - 'b' }}", "ERR TypeError: unsupported operand type(s) for -: 'str' and 'str'"},
};

const RenderCase kSequenceCases[] = {
    {"{{ 'x' * 3 }} {{ [1] * 2 }} {{ 3 * 'ab' }} {{ 'ab' + 'cd' }} {{ [1] + [2] }} {{ (1,) + (2,) }}",
     "xxx [1, 1] ababab abcd [1, 2] (1, 2)"},
    {"{{ 'a' * -1 }}|{{ [1, 2] * 0 }}", "|[]"},
    {"{{ 'a' + 1 }}", "ERR TypeError: can only concatenate str (not \"int\") to str"},
    {"{{ 1 + 'a' }}", "ERR TypeError: unsupported operand type(s) for +: 'int' and 'str'"},
    {"{{ [1] + (1,) }}", "ERR TypeError: can only concatenate list (not \"tuple\") to list"},
    {"{{ (1,) + [1] }}", "ERR TypeError: can only concatenate tuple (not \"list\") to tuple"},
    {"{{ {} + {} }}", "ERR TypeError: unsupported operand type(s) for +: 'dict' and 'dict'"},
    {"{{ 1 + none }}", "ERR TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'"},
    {"{{ 'a' * 1.5 }}", "ERR TypeError: can't multiply sequence by non-int of type 'float'"},
    {"{{ 'a' * 'b' }}", "ERR TypeError: can't multiply sequence by non-int of type 'str'"},
    {"{{ [[1]] + [2] }}", "[[1], 2]"},
};

const RenderCase kComparisonCases[] = {
    {"{{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == (1, 2) }} {{ [1] == (1,) }} {{ 1 == 1.0 }} {{ true == 1 }} {{ "
     "'B' < 'a' }}",
     "True True True False True True True"},
    {"{{ 1 < 'a' }}", "ERR TypeError: '<' not supported between instances of 'int' and 'str'"},
    {"{{ none < 1 }}", "ERR TypeError: '<' not supported between instances of 'NoneType' and 'int'"},
    {"{{ [1] < ['a'] }}", "ERR TypeError: '<' not supported between instances of 'int' and 'str'"},
    {"{{ 'a' in 'abc' }} {{ 1 in [1] }} {{ 'k' in {'k': 1} }} {{ 1.0 in [1] }} {{ [1] in [[1]] }}",
     "True True True True True"},
    {"{{ 1 in 'a' }}", "ERR TypeError: 'in <string>' requires string as left operand, not int"},
    {"{{ 'a' in 1 }}", "ERR TypeError: argument of type 'int' is not iterable"},
    {"{{ 'a' in none }}", "ERR TypeError: argument of type 'NoneType' is not iterable"},
    {"{{ [1] in {} }}", "ERR TypeError: unhashable type: 'list'"},
};

TEST(OperatorsTest, ArithmeticAsJinja2) { ExpectRenders(kArithmeticCases); }
TEST(OperatorsTest, SequenceAsJinja2) { ExpectRenders(kSequenceCases); }
TEST(OperatorsTest, ComparisonAsJinja2) { ExpectRenders(kComparisonCases); }

}  // namespace
}  // namespace cairn::jinja
