// Values printed as Python prints them: str() and repr() (True, None, 5,
// 1.5, 1e-05, ['a', 1], {'k': 'v'}, (1,)), with the provenance of the parts
// kept (a client string inside a printed list stays client text).
#ifndef CAIRN_CHAT_JINJA_PY_FORMAT_H_
#define CAIRN_CHAT_JINJA_PY_FORMAT_H_

#include <string>
#include <string_view>

#include "chat/jinja/value.h"

namespace cairn::jinja {

// repr(float): the shortest digits that read back as `f`, in Python's
// layout (1.0, 0.0001, 1e-05, 1e+16, inf, nan).
std::string PyFloatRepr(double f);
// repr(str): quoted and escaped as Python does ('a', "it's", '\n').
std::string PyStrRepr(std::string_view s);

// str(v) appended to `out`: Undefined prints nothing, strings as they are.
void AppendStr(const Value& v, Text* out);
// repr(v) appended to `out`.
void AppendRepr(const Value& v, Text* out);
Text ToText(const Value& v);
// str(v) without provenance.
std::string ToStr(const Value& v);
std::string ToRepr(const Value& v);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_PY_FORMAT_H_
