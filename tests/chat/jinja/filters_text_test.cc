// Tests of chat/jinja/filters_text.cc: string and number filters and transformers' tojson.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kTextFilterCases[] = {
    {"{{ s|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello-world foo'|title }}|{{ "
     "'hELLo'|capitalize }}",
     "Hello World|a|  HELLO WORLD  |  hello world  |Hello-World Foo|Hello"},
    {"{{ messages[0].content|trim }}|{{ messages[1].content|upper }}", "Sys prompt.|HI <B>&'\" 日本"},
    {"{{ '  a\\n b\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ "
     "'a\\nb'|indent('> ') }}|{{ 'x'|indent(2, first=true) }}",
     "  a\n   b\n\n  c|  a\n  b|a\n  \n  b|a\n> b|  x"},
    {"{{ none|indent }}", "ERR TypeError: unsupported operand type(s) for +=: 'NoneType' and 'str'"},
    {"{{ 5|indent }}", "ERR TypeError: unsupported operand type(s) for +=: 'int' and 'str'"},
    {"{{ x|indent }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ 'abc'|truncate(2) }}", "ERR AssertionError: expected length >= 3, got 2"},
    {"{{ 'abcdefghij'|truncate(5) }}|{{ 'hello world'|truncate(7, leeway=0) }}|{{ 'hello world'|truncate(7, true, "
     "leeway=0) }}|{{ 'hello world foo'|truncate(9, leeway=0) }}",
     "abcdefghij|hell...|hell...|hello..."},
    {"{{ 'a b c_d'|wordcount }}", "3"},
    {"{{ 'Hello'|center(11) }}|{{ 'x'|replace('x', 'yy') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 5|replace(5, 6) }}",
     "   Hello   |yy bba 6"},
    {"{{ '%s-%s'|format(1, 2) }} {{ '%(a)s'|format(a=3) }}", "1-2 3"},
    {"{{ '%s'|format(1, a=2) }}",
     "ERR FilterArgumentError: can't handle positional and keyword arguments at the same time"},
    {"{{ 'a&b'|escape }} {{ 'a&b'|e|e }} {{ 'a&b'|forceescape }} {{ ('<'|safe) ~ '<' }} {{ '<b>x</b>  y &amp; "
     "z'|striptags }} {{ '<'|e + '<' }} {{ '<' + '<'|safe }}",
     "a&amp;b a&amp;b a&amp;b << x y & z &lt;&lt; &lt;<"},
    {"{{ 'a b/c'|urlencode }} {{ {'k': 'v w'}|urlencode }}", "a%20b/c k=v+w"},
    {"{{ {'a': 1, 'b': 'x y', 'c': none}|xmlattr }}", " a=\"1\" b=\"x y\""},
    {"{{ 1234567|filesizeformat }} {{ 1024|filesizeformat(true) }} {{ 1|filesizeformat }} {{ 999|filesizeformat }}",
     "1.2 MB 1.0 KiB 1 Byte 999 Bytes"},
    {"{{ d|pprint }} {{ 'x'|pprint }}", "{'a': 1, 'b': [1, 2.5, None, True], 'c': {'x': 'y'}} 'x'"},
    {"{{ -3|abs }} {{ -2.5|abs }} {{ 3.14159|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 3|round }} {{ "
     "2.567|round(1, 'floor') }} {{ 2.123|round(1, 'ceil') }}",
     "3 2.5 3.14 2.0 4.0 3 2.5 2.2"},
    {"{{ 'x'|round }}", "ERR TypeError: type str doesn't define __round__ method"},
    {"{{ 1|round(method='x') }}", "ERR FilterArgumentError: method must be common, ceil or floor"},
    {"{{ '42.5'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ ' 12 '|int }} {{ 3.9|int }} {{ "
     "none|int }} {{ '1_000'|int }}",
     "42 0 7 26 12 3 0 1000"},
    {"{{ '3.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ ' 1e3 '|float }}", "3.5 0.0 2.0 1000.0"},
    {"{{ 5|string ~ 'x' }} {{ none|string }} {{ [1]|string }}", "5x None [1]"},
    {"{{ x|trim }}|{{ x|upper }}|{{ x|string }}|{{ x|e }}|{{ x|pprint }}", "||||Undefined"},
    {"{{ x|abs }}", "ERR TypeError: bad operand type for abs(): 'Undefined'"},
    {"{{ x|round }}", "ERR TypeError: type Undefined doesn't define __round__ method"},
    {"{{ x|int }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ x|float }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ 'ä ß ǅ'|upper }} {{ 'ΣΑΣ ΟΔΟΣ'|lower }} {{ 'İ'|lower|length }} {{ 'ǆa'|capitalize }}", "Ä SS Ǆ σας οδος 2 ǅa"},
};

const RenderCase kToJsonCases[] = {
    {"{{ tools|tojson }}",
     "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"desc\", \"parameters\": {\"type\": "
     "\"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"required\": [\"a\"]}}}]"},
    {"{{ tools|tojson(indent=2) }}",
     "[\n  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"f\",\n      \"description\": "
     "\"desc\",\n      \"parameters\": {\n        \"type\": \"object\",\n        \"properties\": {\n          \"a\": "
     "{\n            \"type\": \"string\"\n          }\n        },\n        \"required\": [\n          \"a\"\n        "
     "]\n      }\n    }\n  }\n]"},
    {"{{ d|tojson(sort_keys=true) }}", "{\"a\": 1, \"b\": [1, 2.5, null, true], \"c\": {\"x\": \"y\"}}"},
    {"{{ messages[1].content|tojson }}", "\"Hi <b>&'\\\" 日本\""},
    {"{{ none|tojson }} {{ true|tojson }} {{ 1.0|tojson }} {{ 'é\\n\\t\\u0001'|tojson }} {{ "
     "'é😀'|tojson(ensure_ascii=true) }}",
     "null true 1.0 \"é\\n\\t\\u0001\" \"\\u00e9\\ud83d\\ude00\""},
    {"{{ [1,[2,[3]]]|tojson }} {{ {'a': [1, {'b': none}]}|tojson(indent=2) }} {{ {'a': 1, 'b': "
     "2}|tojson(separators=(',', ':')) }} {{ [1, 2]|tojson(indent='--') }} {{ {}|tojson(indent=2) }}",
     "[1, [2, [3]]] {\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n} {\"a\":1,\"b\":2} [\n--1,\n--2\n] "
     "{}"},
    {"{{ {1: 'a', true: 'b', none: 'c', 2.5: 'd'}|tojson }}", "{\"1\": \"b\", \"null\": \"c\", \"2.5\": \"d\"}"},
    {"{{ (1,2)|tojson }}", "[1, 2]"},
    {"{{ x|tojson }}", "ERR TypeError: Object of type Undefined is not JSON serializable"},
    {"{{ [x]|tojson }}", "ERR TypeError: Object of type Undefined is not JSON serializable"},
    {"{{ namespace()|tojson }}", "ERR TypeError: Object of type Namespace is not JSON serializable"},
    {"{{ messages|map(attribute='role')|tojson }}", "ERR TypeError: Object of type generator is not JSON serializable"},
    {"{{ {(1,2): 3}|tojson }}", "ERR TypeError: keys must be str, int, float, bool or None, not tuple"},
    {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, indent=1) }}", "{\n \"a\": 2,\n \"b\": 1\n}"},
    {"{{ {'b': 1, 2: 2}|tojson(sort_keys=true) }}",
     "ERR TypeError: '<' not supported between instances of 'int' and 'str'"},
    {"{{ (1.5e300 * 1e10)|tojson }} {{ 1e-7|tojson }}", "Infinity 1e-07"},
    {"{{ 'a'|safe|tojson }}", "\"a\""},
};

TEST(FiltersTextTest, TextFilterAsJinja2) { ExpectRenders(kTextFilterCases); }
TEST(FiltersTextTest, ToJsonAsJinja2) { ExpectRenders(kToJsonCases); }

}  // namespace
}  // namespace cairn::jinja
