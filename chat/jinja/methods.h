// The methods of str, list, tuple and dict that templates may call
// (internal). Methods that would modify a value exist but are unsafe: the
// immutable sandbox refuses them (SecurityError when called).
#ifndef CAIRN_CHAT_JINJA_METHODS_H_
#define CAIRN_CHAT_JINJA_METHODS_H_

#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "chat/jinja/value.h"

namespace cairn::jinja {

class Renderer;

using MethodFn = absl::StatusOr<Value> (*)(Renderer& r, const Value& self, CallArgs& args);
struct NamedMethod {
  std::string_view name;
  MethodFn fn;
};

std::span<const NamedMethod> StrMethods();
std::span<const NamedMethod> ListMethods();
std::span<const NamedMethod> DictMethods();

// list.append, dict.update and the like.
bool IsMutatingMethod(const Value& receiver, std::string_view name);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_METHODS_H_
