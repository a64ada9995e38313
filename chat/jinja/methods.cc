// list, tuple and dict methods, and binding any method to its receiver.
#include "chat/jinja/methods.h"

#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

absl::StatusOr<Value> Get(Renderer&, const Value& self, CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("get", args, {"key", "default"}, 1));
  JINJA_RETURN_IF_ERROR(HashKey(a[0]).status());
  if (const Value* v = self.dict().Find(a[0])) return *v;
  return a.has(1) ? a[1] : Value::None();
}

absl::StatusOr<Value> Items(Renderer& r, const Value& self, CallArgs& args) {
  JINJA_RETURN_IF_ERROR(Bind("items", args, {}).status());
  JINJA_RETURN_IF_ERROR(r.Charge(self.dict().size() * 2 * sizeof(Value)));
  std::vector<Value> items;
  items.reserve(self.dict().size());
  for (const auto& [key, value] : self.dict().entries()) items.push_back(Value::List({key, value}, ListKind::kTuple));
  return Value::PythonSequence(std::move(items), "dict_items");
}

template <bool kKeys>
absl::StatusOr<Value> KeysOrValues(Renderer& r, const Value& self, CallArgs& args) {
  JINJA_RETURN_IF_ERROR(Bind(kKeys ? "keys" : "values", args, {}).status());
  JINJA_RETURN_IF_ERROR(r.Charge(self.dict().size() * sizeof(Value)));
  std::vector<Value> items;
  items.reserve(self.dict().size());
  for (const auto& [key, value] : self.dict().entries()) items.push_back(kKeys ? key : value);
  return Value::PythonSequence(std::move(items), kKeys ? "dict_keys" : "dict_values");
}

absl::StatusOr<Value> Copy(Renderer&, const Value& self, CallArgs& args) {
  JINJA_RETURN_IF_ERROR(Bind("copy", args, {}).status());
  return self;  // values are immutable: a copy is the value
}

absl::StatusOr<Value> CountItem(Renderer&, const Value& self, CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("count", args, {"value"}, 1));
  return Value::Int(
      std::count_if(self.items().begin(), self.items().end(), [&](const Value& v) { return Equals(v, a[0]); }));
}

absl::StatusOr<Value> IndexOf(Renderer&, const Value& self, CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("index", args, {"value", "start", "stop"}, 1));
  const int64_t n = static_cast<int64_t>(self.items().size());
  int64_t start = 0;
  int64_t stop = n;
  if (a.has(1)) {
    JINJA_ASSIGN_OR_RETURN(start, ToInt(a[1], "start"));
  }
  if (a.has(2)) {
    JINJA_ASSIGN_OR_RETURN(stop, ToInt(a[2], "stop"));
  }
  if (start < 0) start = std::max<int64_t>(0, start + n);
  if (stop < 0) stop = std::max<int64_t>(0, stop + n);
  for (int64_t i = start; i < std::min(stop, n); ++i) {
    if (Equals(self.items()[i], a[0])) return Value::Int(i);
  }
  return ValueError(Cat(ToRepr(a[0]), " is not in ", PyTypeName(self)));
}

constexpr NamedMethod kListMethods[] = {
    {"copy", Copy},
    {"count", CountItem},
    {"index", IndexOf},
};

constexpr NamedMethod kDictMethods[] = {
    {"copy", Copy}, {"get", Get}, {"items", Items}, {"keys", KeysOrValues<true>}, {"values", KeysOrValues<false>},
};

constexpr std::string_view kMutatingListMethods[] = {"append", "clear",  "extend",  "insert",
                                                     "pop",    "remove", "reverse", "sort"};
constexpr std::string_view kMutatingDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};

}  // namespace

std::span<const NamedMethod> ListMethods() { return kListMethods; }
std::span<const NamedMethod> DictMethods() { return kDictMethods; }

bool IsMutatingMethod(const Value& receiver, std::string_view name) {
  if (receiver.is_list() && receiver.list().kind == ListKind::kList && receiver.list().python_type.empty()) {
    return std::find(std::begin(kMutatingListMethods), std::end(kMutatingListMethods), name) !=
           std::end(kMutatingListMethods);
  }
  if (receiver.is_dict()) {
    return std::find(std::begin(kMutatingDictMethods), std::end(kMutatingDictMethods), name) !=
           std::end(kMutatingDictMethods);
  }
  return false;
}

std::optional<Value> BindMethod(const Value& receiver, std::string_view name) {
  std::span<const NamedMethod> table;
  if (receiver.is_string()) {
    table = StrMethods();
  } else if (receiver.is_list() && !receiver.is_generator()) {
    table = ListMethods();
    if (receiver.list().kind == ListKind::kTuple && name == "copy") return std::nullopt;
  } else if (receiver.is_dict()) {
    table = DictMethods();
  }
  for (const NamedMethod& m : table) {
    if (m.name != name) continue;
    const MethodFn fn = m.fn;
    return MakeMethod(std::string(name), [receiver, fn](Renderer& r, CallArgs args) { return fn(r, receiver, args); });
  }
  return std::nullopt;
}

}  // namespace cairn::jinja
