#include "chat/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

struct UndefinedData {
  std::string message;
  bool security = false;
};

const Text& EmptyText() {
  static const Text* empty = new Text();
  return *empty;
}

const ListData& EmptyList() {
  static const ListData* empty = new ListData();
  return *empty;
}

const Dict& EmptyDict() {
  static const Dict* empty = new Dict();
  return *empty;
}

// A float that holds an exact int64 value.
bool FloatAsInt(double f, int64_t* out) {
  if (!std::isfinite(f) || f != std::floor(f) || f < -9.2233720368547758e18 || f >= 9.2233720368547758e18) {
    return false;
  }
  *out = static_cast<int64_t>(f);
  return true;
}

bool NumbersEqual(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) return a.i() == b.i();
  if (a.is_float() && b.is_float()) return a.f() == b.f();
  const Value& fl = a.is_float() ? a : b;
  const Value& in = a.is_float() ? b : a;
  int64_t exact = 0;
  return FloatAsInt(fl.f(), &exact) && exact == in.i();
}

}  // namespace

Text::Text(std::string bytes, bool client) : bytes_(std::move(bytes)) {
  if (client && !bytes_.empty()) client_.push_back({0, bytes_.size()});
}

void Text::AddSpan(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!client_.empty() && client_.back().end == begin) {
    client_.back().end = end;
  } else {
    client_.push_back({begin, end});
  }
}

void Text::Append(const Text& other) {
  const size_t shift = bytes_.size();
  bytes_ += other.bytes_;
  for (const ClientSpan& s : other.client_) AddSpan(s.begin + shift, s.end + shift);
  for (const ObjectMark& m : other.marks_) marks_.push_back({m.offset + shift, m.object});
}

void Text::Append(std::string_view bytes, bool client) {
  const size_t begin = bytes_.size();
  bytes_ += bytes;
  if (client) AddSpan(begin, bytes_.size());
}

Value Value::Undefined(std::string message, bool security) {
  Value v;
  v.heap_ = std::make_shared<const UndefinedData>(UndefinedData{std::move(message), security});
  return v;
}

Value Value::Scalar(ValueKind kind, bool client) {
  Value v;
  v.kind_ = kind;
  v.client_ = client;
  return v;
}

Value Value::None() { return Scalar(ValueKind::kNone, false); }

Value Value::Bool(bool b, bool client) {
  Value v = Scalar(ValueKind::kBool, client);
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i, bool client) {
  Value v = Scalar(ValueKind::kInt, client);
  v.i_ = i;
  return v;
}

Value Value::Float(double f, bool client) {
  Value v = Scalar(ValueKind::kFloat, client);
  v.f_ = f;
  return v;
}

Value Value::String(Text text) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.heap_ = std::make_shared<const Text>(std::move(text));
  return v;
}

Value Value::String(std::string bytes, bool client) { return String(Text(std::move(bytes), client)); }

Value Value::Markup(Text text) {
  Value v = String(std::move(text));
  v.markup_ = true;
  return v;
}

Value Value::FromListData(std::shared_ptr<ListData> data) {
  Value v;
  v.kind_ = ValueKind::kList;
  for (const Value& item : data->items) data->depth = std::max(data->depth, item.depth() + 1);
  v.heap_ = std::move(data);
  return v;
}

Value Value::List(std::vector<Value> items, ListKind kind) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = kind;
  return FromListData(std::move(data));
}

Value Value::Generator(std::vector<Value> items, absl::Status error) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = ListKind::kGenerator;
  data->error = std::move(error);
  return FromListData(std::move(data));
}

Value Value::PythonSequence(std::vector<Value> items, std::string python_type, std::string repr) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->python_type = std::move(python_type);
  data->repr = std::move(repr);
  return FromListData(std::move(data));
}

Value Value::FromDict(Dict dict) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.heap_ = std::make_shared<const Dict>(std::move(dict));
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = ValueKind::kObject;
  v.heap_ = std::move(object);
  return v;
}

const Text& Value::text() const {
  return kind_ == ValueKind::kString ? *static_cast<const Text*>(heap_.get()) : EmptyText();
}

const ListData& Value::list() const {
  return kind_ == ValueKind::kList ? *static_cast<const ListData*>(heap_.get()) : EmptyList();
}

const Dict& Value::dict() const {
  return kind_ == ValueKind::kDict ? *static_cast<const Dict*>(heap_.get()) : EmptyDict();
}

Object* Value::object() const {
  // Objects are the one mutable heap part (a namespace's attributes).
  return kind_ == ValueKind::kObject ? const_cast<Object*>(static_cast<const Object*>(heap_.get())) : nullptr;
}

const std::string& Value::undefined_message() const {
  static const std::string* plain = new std::string("undefined value");
  if (kind_ != ValueKind::kUndefined || heap_ == nullptr) return *plain;
  return static_cast<const UndefinedData*>(heap_.get())->message;
}

int Value::depth() const {
  if (kind_ == ValueKind::kList) return list().depth;
  if (kind_ == ValueKind::kDict) return dict().depth();
  return 0;
}

bool Value::undefined_security() const {
  return kind_ == ValueKind::kUndefined && heap_ != nullptr && static_cast<const UndefinedData*>(heap_.get())->security;
}

const Value* Dict::Find(const Value& key) const {
  auto hash = HashKey(key);
  if (!hash.ok()) return nullptr;
  auto it = index_.find(*hash);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

absl::Status Dict::Set(Value key, Value value) {
  auto hash = HashKey(key);
  if (!hash.ok()) return hash.status();
  depth_ = std::max({depth_, key.depth() + 1, value.depth() + 1});
  auto [it, inserted] = index_.try_emplace(*std::move(hash), entries_.size());
  if (inserted) {
    entries_.emplace_back(std::move(key), std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
  return absl::OkStatus();
}

std::string Object::type_repr() const { return Cat(type_name(), " object"); }

absl::StatusOr<Value> Object::GetAttr(std::string_view name) const {
  return Value::Undefined(Cat("'", type_repr(), "' has no attribute '", name, "'"));
}

absl::StatusOr<Value> Object::Call(Renderer&, CallArgs) const {
  return TypeError(Cat("'", type_name(), "' object is not callable"));
}

std::string Object::Repr() const { return Cat("<", type_name(), " object>"); }

absl::Status Object::SetAttr(std::string_view, Value) {
  return TemplateFailure(kSecurityError, Cat("'", type_name(), "' object does not accept attributes"));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return v.b();
    case ValueKind::kInt:
      return v.i() != 0;
    case ValueKind::kFloat:
      return v.f() != 0.0;
    case ValueKind::kString:
      return !v.str().empty();
    case ValueKind::kList:
      return v.is_generator() || !v.items().empty();
    case ValueKind::kDict:
      return !v.dict().empty();
    case ValueKind::kObject:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return NumbersEqual(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.str() == b.str();
    case ValueKind::kList: {
      if (a.is_generator() || b.is_generator()) return a.identity() == b.identity();
      if ((a.list().kind == ListKind::kTuple) != (b.list().kind == ListKind::kTuple)) return false;
      if (a.list().python_type != b.list().python_type) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [key, value] : a.dict().entries()) {
        const Value* other = b.dict().Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case ValueKind::kObject:
      return a.identity() == b.identity();
    default:
      return false;
  }
}

std::string PyTypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      if (!v.list().python_type.empty()) return v.list().python_type;
      switch (v.list().kind) {
        case ListKind::kList:
          return "list";
        case ListKind::kTuple:
          return "tuple";
        case ListKind::kGenerator:
          return "generator";
      }
      return "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kObject:
      return std::string(v.object()->type_name());
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_object()) return v.object()->type_repr();
  return Cat(PyTypeName(v), " object");
}

absl::StatusOr<std::string> HashKey(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::string("U");
    case ValueKind::kNone:
      return std::string("N");
    case ValueKind::kBool:
    case ValueKind::kInt:
      return Cat("n", v.i());
    case ValueKind::kFloat: {
      int64_t exact = 0;
      if (FloatAsInt(v.f(), &exact)) return Cat("n", exact);
      return Cat("f", PyFloatRepr(v.f()));
    }
    case ValueKind::kString:
      return Cat("s", v.str());
    case ValueKind::kList: {
      // Generators hash by identity; lists are unhashable.
      if (v.is_generator()) return Cat("o", reinterpret_cast<uintptr_t>(v.identity()));
      if (v.list().kind != ListKind::kTuple) break;
      std::string key = "t";
      for (const Value& item : v.items()) {
        auto part = HashKey(item);
        if (!part.ok()) return part.status();
        CatAppend(&key, part->size(), ":", *part);
      }
      return key;
    }
    case ValueKind::kDict:
      break;
    case ValueKind::kObject:
      return Cat("o", reinterpret_cast<uintptr_t>(v.identity()));
  }
  return TypeError(Cat("unhashable type: '", PyTypeName(v), "'"));
}

}  // namespace cairn::jinja
