// Tests of chat/jinja/filters_seq.cc: sequence and mapping filters, generators included.
// Expected outputs are what Jinja2 3.1 renders for the same template and
// variables (render_testing.h), in the sandbox transformers uses.
#include "gtest/gtest.h"
#include "tests/chat/jinja/render_testing.h"

namespace cairn::jinja {
namespace {

using testing::ExpectRenders;
using testing::RenderCase;

const RenderCase kSequenceFilterCases[] = {
    {"{{ messages|map(attribute='role')|list }}", "['system', 'user', 'assistant']"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }}", "1"},
    {"{{ d|items|list }} {{ d|dictsort }}",
     "[('a', 1), ('b', [1, 2.5, None, True]), ('c', {'x': 'y'})] [('a', 1), ('b', [1, 2.5, None, True]), ('c', {'x': "
     "'y'})]"},
    {"{{ [3,1,2]|sort }} {{ ['b','A','a']|sort }} {{ ['b','A','a']|unique|list }} {{ "
     "['b','A','a']|sort(case_sensitive=true) }} {{ [1, 2]|sort(reverse=true) }}",
     "[1, 2, 3] ['A', 'a', 'b'] ['b', 'A'] ['A', 'a', 'b'] [2, 1]"},
    {"{{ [1,2,3]|sum }} {{ [1,2,3]|join('-') }} {{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ [1,2,3]|max }} {{ [3, 1]|min "
     "}} {{ 'abc'|length }} {{ d|count }}",
     "6 1-2-3 1 3 3 1 3 3"},
    {"{{ x|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ 0|d(5) }}", "dflt e None 0"},
    {"{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3,4,5]|batch(2, 0)|list }} {{ [1,2,3,4,5]|slice(2)|list }} {{ "
     "[1,2,3,4]|slice(3, 'f')|list }}",
     "[[1, 2], [3, 4], [5]] [[1, 2], [3, 4], [5, 0]] [[1, 2, 3], [4, 5]] [[1, 2], [3, 'f'], [4, 'f']]"},
    {"{{ [{'a': 2}, {'a': 1}]|sort(attribute='a') }} {{ [{'a': 1, 'b': 2}, {'a': 1, 'b': 1}]|sort(attribute='a,b') }}",
     "[{'a': 1}, {'a': 2}] [{'a': 1, 'b': 1}, {'a': 1, 'b': 2}]"},
    {"{{ [{'a': 'x', 'b': 1}, {'a': 'y', 'b': 2}, {'a': 'x', 'b': 3}]|groupby('a') }}",
     "[('x', [{'a': 'x', 'b': 1}, {'a': 'x', 'b': 3}]), ('y', [{'a': 'y', 'b': 2}])]"},
    {"{% for k, items in [{'a': 'x'}, {'a': 'y'}, {'a': 'x'}]|groupby('a') %}{{ k }}{{ items|length }}{% endfor %}",
     "x2y1"},
    {"{{ [1, 2]|sum(start=10) }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }}", "13 3"},
    {"{{ ['a', 'b']|map('upper')|join }} {{ [{'x': {'y': 1}}]|map(attribute='x.y')|list }} {{ [{}]|map(attribute='z', "
     "default=0)|list }} {{ [[1, 2]]|map(attribute='1')|list }} {{ ['ab']|map('replace', 'a', 'x')|list }}",
     "AB [1] [0] [2] ['xb']"},
    {"{{ [0, 1, '', 'a', none]|select|list }} {{ [1,2,3]|reject('odd')|list }} {{ [{'a': 1}, {'a': "
     "0}]|rejectattr('a')|list }} {{ [1, 5, 10]|select('gt', 4)|list }} {{ [{'a': 1}]|selectattr('a', 'in', [1])|list "
     "}}",
     "[1, 'a'] [2] [{'a': 0}] [5, 10] [{'a': 1}]"},
    {"{{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'A': 2}|dictsort }} {{ {'b': 1, 'A': 2}|dictsort(true) "
     "}} {{ {'a': 1, 'b': 2}|dictsort(reverse=true) }}",
     "[('b', 1), ('a', 2)] [('A', 2), ('b', 1)] [('A', 2), ('b', 1)] [('b', 2), ('a', 1)]"},
    {"{{ 'a'|attr('upper')() }} {{ {'a':1}|attr('a') }} {{ {'a':1}|attr('items')()|list }}", "A  [('a', 1)]"},
    {"{{ [1,2]|reverse|list }} {{ 'abc'|reverse }} {{ [1,2]|map('string')|reverse }}", "[2, 1] cba ['2', '1']"},
    {"{{ e|first }}|{{ e|last }}|{{ e|max }}|{{ e|sum }}|{{ e|join(',') }}", "|||0|"},
    {"{{ 'abc'|list }} {{ {'a': 1}|list }} {{ x|list }}", "['a', 'b', 'c'] ['a'] []"},
    {"{% set g = [1,2,3]|map('string') %}{{ g|list }}{{ g|list }}", "['1', '2', '3'][]"},
    {"{% set g = [1,2,3]|select('odd') %}{% for x in g %}{{ x }}{% endfor %}{% for x in g %}{{ x }}{% endfor %}", "13"},
    {"{{ [1,2]|map('string')|length }}", "ERR TypeError: object of type 'generator' has no len()"},
    {"{{ ([1,2]|map('string'))[0] }}", ""},
    {"{{ [1]|map('nosuch')|list }}", "ERR TemplateRuntimeError: No filter named 'nosuch'."},
    {"{{ [1]|select('nosuch')|list }}", "ERR TemplateRuntimeError: No test named 'nosuch'."},
    {"{{ [1, 'a']|sort }}", "ERR TypeError: '<' not supported between instances of 'str' and 'int'"},
    {"{{ {'a': 1}|dictsort(by='x') }}", "ERR FilterArgumentError: You can only sort by either \"key\" or \"value\""},
    {"{{ 5|length }}", "ERR TypeError: object of type 'int' has no len()"},
    {"{{ 5|items|list }}", "ERR TypeError: Can only get item pairs from a mapping."},
    {"{{ x|items|list }} {{ x|join(',') }} {{ x|sort }} {{ x|sum }} {{ x|reverse|list }} {{ x|map('upper')|list }} {{ "
     "x|select|list }} {{ x|unique|list }} {{ x|batch(2)|list }} {{ x|max }}|",
     "[]  [] 0 [] [] [] [] [] |"},
    {"{{ x|dictsort }}", "ERR UndefinedError: 'x' is undefined"},
    {"{{ [1, 2, 1]|unique|list }} {{ [{'a': 'A'}, {'a': 'a'}]|unique(attribute='a')|list }}", "[1, 2] [{'a': 'A'}]"},
    {"{{ [[1], [1]]|unique|list }}", "ERR TypeError: unhashable type: 'list'"},
    {"{{ [1, 2]|last }} {{ (1, 2)|last }}", "2 2"},
    {"{{ [1, 2]|map('string')|last }}", "ERR TypeError: 'generator' object is not reversible"},
    {"{{ [1, 2]|join(attribute='x') }}", ""},
};

TEST(FiltersSeqTest, SequenceFilterAsJinja2) { ExpectRenders(kSequenceFilterCases); }

}  // namespace
}  // namespace cairn::jinja
