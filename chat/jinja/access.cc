// Attribute, item and slice access as Jinja2's immutable sandbox resolves
// them (sandbox.py getattr / getitem).
#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

Value MissingAttribute(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("'", ObjectTypeRepr(obj), "' has no attribute '", name, "'"));
}

Value MissingElement(const Value& obj, std::string_view key_repr) {
  return Value::Undefined(Cat(ObjectTypeRepr(obj), " has no element ", key_repr));
}

Value Unsafe(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("access to attribute '", name, "' of '", PyTypeName(obj), "' object is unsafe."), true);
}

// The attribute if the type has it: a bound method, or an unsafe one.
std::optional<Value> TypeAttribute(const Value& obj, std::string_view name) {
  if (name.starts_with("__")) return Unsafe(obj, name);
  if (IsMutatingMethod(obj, name)) return Unsafe(obj, name);
  return BindMethod(obj, name);
}

// Python's slice.indices(length) and the number of items selected.
struct SliceIndices {
  int64_t start, stop, step, count;
};

absl::StatusOr<std::optional<SliceIndices>> Indices(int64_t length, const Value& start, const Value& stop,
                                                    const Value& step) {
  const auto valid = [](const Value& v) { return v.is_none() || v.is_int() || v.is_bool(); };
  if (!valid(start) || !valid(stop) || !valid(step)) return std::optional<SliceIndices>();
  SliceIndices s;
  s.step = step.is_none() ? 1 : step.i();
  if (s.step == 0) return ValueError("slice step cannot be zero");
  const auto adjust = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = v.i();
    if (i < 0) {
      i += length;
      if (i < 0) i = s.step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = s.step < 0 ? length - 1 : length;
    }
    return i;
  };
  s.start = adjust(start, s.step < 0 ? length - 1 : 0);
  s.stop = adjust(stop, s.step < 0 ? -1 : length);
  if (s.step > 0) {
    s.count = s.stop > s.start ? (s.stop - s.start - 1) / s.step + 1 : 0;
  } else {
    s.count = s.start > s.stop ? (s.start - s.stop - 1) / (-s.step) + 1 : 0;
  }
  return std::optional<SliceIndices>(s);
}

// The value of a one-character string of `s`.
Value CharAt(const Value& s, const PyChar& c) { return Derived(s.str().substr(c.offset, c.size), {&s}, s.markup()); }

}  // namespace

absl::StatusOr<Value> GetAttribute(Renderer&, const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case ValueKind::kUndefined:
      return UndefinedFailure(obj);
    case ValueKind::kObject:
      if (name.starts_with("_")) return Unsafe(obj, name);
      return obj.object()->GetAttr(name);
    case ValueKind::kDict:
      if (auto attr = TypeAttribute(obj, name)) return *attr;
      if (const Value* v = obj.dict().Find(Value::String(std::string(name)))) return *v;
      return MissingAttribute(obj, name);
    default:
      if (auto attr = TypeAttribute(obj, name)) return *attr;
      return MissingAttribute(obj, name);
  }
}

absl::StatusOr<Value> GetItem(Renderer& r, const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedFailure(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(key)) return *v;
  } else if (obj.is_list() && !obj.is_generator() && !obj.list().python_type.starts_with("dict_") &&
             (key.is_int() || key.is_bool())) {
    const auto& items = obj.items();
    int64_t i = key.i();
    if (i < 0) i += static_cast<int64_t>(items.size());
    if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[i];
    return MissingElement(obj, ToRepr(key));
  } else if (obj.is_string() && (key.is_int() || key.is_bool())) {
    const std::vector<PyChar> chars = PyChars(obj.str());
    int64_t i = key.i();
    if (i < 0) i += static_cast<int64_t>(chars.size());
    if (i >= 0 && i < static_cast<int64_t>(chars.size())) return CharAt(obj, chars[i]);
    return MissingElement(obj, ToRepr(key));
  }
  if (key.is_string()) {
    // obj[name] failed: Jinja2 tries the attribute.
    if (obj.is_object()) return GetAttribute(r, obj, key.str());
    if (auto attr = TypeAttribute(obj, key.str())) return *attr;
    return MissingAttribute(obj, key.str());
  }
  return MissingElement(obj, ToRepr(key));
}

// Jinja2 slices with Python's own obj[a:b:c], outside the sandbox's
// getitem: a failure is Python's TypeError, not an Undefined.
absl::StatusOr<Value> SliceValue(Renderer& r, const Value& obj, const Value& start, const Value& stop,
                                 const Value& step) {
  if (obj.is_undefined()) return UndefinedFailure(obj);
  const bool sequence = obj.is_string() || (obj.is_list() && !obj.is_generator() &&
                                            (obj.list().python_type.empty() || obj.list().python_type == "range"));
  if (!sequence) {
    if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
    return TypeError(Cat("'", PyTypeName(obj), "' object is not subscriptable"));
  }
  const int64_t length =
      obj.is_string() ? static_cast<int64_t>(PyLength(obj.str())) : static_cast<int64_t>(obj.items().size());
  JINJA_ASSIGN_OR_RETURN(auto s, Indices(length, start, stop, step));
  if (!s.has_value()) return TypeError("slice indices must be integers or None or have an __index__ method");
  if (obj.is_string()) {
    const std::vector<PyChar> chars = PyChars(obj.str());
    std::string out;
    for (int64_t k = 0, i = s->start; k < s->count; ++k, i += s->step) {
      out.append(obj.str(), chars[i].offset, chars[i].size);
    }
    JINJA_RETURN_IF_ERROR(r.Charge(out.size()));
    return Derived(std::move(out), {&obj}, obj.markup());
  }
  const auto& items = obj.items();
  std::vector<Value> out;
  out.reserve(s->count);
  for (int64_t k = 0, i = s->start; k < s->count; ++k, i += s->step) out.push_back(items[i]);
  JINJA_RETURN_IF_ERROR(r.Charge(out.size() * sizeof(Value)));
  return Value::List(std::move(out), obj.list().kind);
}

}  // namespace cairn::jinja
