// The values templates compute with, as Jinja2 sees Python's: Undefined,
// None, bool, int (64-bit here), float, str, list / tuple / generator, dict
// (insertion-ordered, like Python's) and runtime objects (namespace, loop,
// macro, function, bound method).
//
// Provenance: a string is a Text, bytes plus the byte ranges that are client
// text (message contents, tool schemas, anything from the conversation), so
// that the rendered output says which bytes the client wrote. Scalars from
// the client carry a flag, printed as client text. Texts also carry marks,
// the offsets where the rendering of a tracked object (a message) starts.
//
// Values are immutable once built (the sandbox refuses list.append and the
// like), so copies share their heap parts; only a namespace changes, through
// `{% set ns.attr = ... %}`. Not thread-safe to share across threads while a
// render runs (reference counts are atomic, generator state is not).
#ifndef CAIRN_CHAT_JINJA_VALUE_H_
#define CAIRN_CHAT_JINJA_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn::jinja {

// Bytes [begin, end) of a Text that are client text.
struct ClientSpan {
  size_t begin;
  size_t end;
};

// The rendering of tracked object `object` (an index the caller chose)
// starts at byte `offset`.
struct ObjectMark {
  size_t offset;
  int object;
};

// A string with its provenance. Concatenation keeps every span and mark at
// its shifted place; a string derived otherwise (a filter, a method) is
// built whole, as client text when any input had client text.
class Text {
 public:
  Text() = default;
  explicit Text(std::string bytes, bool client = false);

  const std::string& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  // Sorted, disjoint, never empty nor adjacent.
  const std::vector<ClientSpan>& client_spans() const { return client_; }
  bool has_client() const { return !client_.empty(); }
  const std::vector<ObjectMark>& marks() const { return marks_; }

  void Append(const Text& other);
  void Append(std::string_view bytes, bool client);
  void AddMark(size_t offset, int object) { marks_.push_back({offset, object}); }

 private:
  void AddSpan(size_t begin, size_t end);

  std::string bytes_;
  std::vector<ClientSpan> client_;
  std::vector<ObjectMark> marks_;
};

enum class ValueKind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject };
// Tuples print as (a, b); generators (map, select, ... results) are consumed
// by their first iteration and are not JSON serializable, as in Python.
enum class ListKind : uint8_t { kList, kTuple, kGenerator };

class Value;
class Dict;
class Object;

struct ListData {
  std::vector<Value> items;
  ListKind kind = ListKind::kList;
  // Generators: set by the first iteration, which alone sees the items.
  mutable bool consumed = false;
  // Generators: the error their evaluation stopped at, raised when consumed.
  absl::Status error;
  // Nesting: 1 + the deepest item's (the renderer bounds it, so that
  // printing and comparing values cannot recurse without end).
  int depth = 1;
  // Python types that iterate like lists but print as themselves: "range"
  // (printed as `repr`), "dict_keys", "dict_values", "dict_items" (not
  // subscriptable). Empty for a list, tuple or generator.
  std::string python_type;
  std::string repr;
};

class Value {
 public:
  // Undefined, as a name no one defined.
  Value() = default;
  // Undefined whose use raises `message` (UndefinedError, or SecurityError
  // for an attribute the sandbox refuses).
  static Value Undefined(std::string message, bool security = false);
  static Value None();
  static Value Bool(bool b, bool client = false);
  static Value Int(int64_t i, bool client = false);
  static Value Float(double f, bool client = false);
  static Value String(Text text);
  static Value String(std::string bytes, bool client = false);
  // An HTML-safe string (markupsafe's Markup: `safe`, `escape`): joined
  // with a plain string by + or %, it escapes the other.
  static Value Markup(Text text);
  static Value List(std::vector<Value> items, ListKind kind = ListKind::kList);
  static Value Generator(std::vector<Value> items, absl::Status error);
  // A list that Python holds as another type (ListData::python_type).
  static Value PythonSequence(std::vector<Value> items, std::string python_type, std::string repr = "");
  static Value FromDict(Dict dict);
  static Value FromObject(std::shared_ptr<Object> object);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  // int or bool (bool is an int in Python), or float.
  bool is_number() const { return is_int() || is_bool() || is_float(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_list() const { return kind_ == ValueKind::kList; }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_object() const { return kind_ == ValueKind::kObject; }
  bool is_generator() const { return is_list() && list().kind == ListKind::kGenerator; }

  // A scalar the client sent (its printed form is client text).
  bool client() const { return client_; }
  bool markup() const { return markup_; }

  bool b() const { return b_; }
  // int value of an int or a bool.
  int64_t i() const { return kind_ == ValueKind::kBool ? (b_ ? 1 : 0) : i_; }
  // float value of any number.
  double f() const { return kind_ == ValueKind::kFloat ? f_ : static_cast<double>(i()); }
  const Text& text() const;
  const std::string& str() const { return text().bytes(); }
  const ListData& list() const;
  const std::vector<Value>& items() const { return list().items; }
  const Dict& dict() const;
  Object* object() const;
  // The error an undefined value raises when used.
  const std::string& undefined_message() const;
  bool undefined_security() const;
  // The heap part of a list, dict or object, for identity (nullptr otherwise).
  const void* identity() const { return heap_.get(); }
  // Nesting depth of a list or dict (0 for anything else).
  int depth() const;

 private:
  static Value FromListData(std::shared_ptr<ListData> data);
  static Value Scalar(ValueKind kind, bool client);

  ValueKind kind_ = ValueKind::kUndefined;
  bool client_ = false;
  bool markup_ = false;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const void> heap_;
};

// A Python dict: insertion-ordered, keys of any hashable value (1, 1.0 and
// True are the same key).
class Dict {
 public:
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  // nullptr when absent or unhashable.
  const Value* Find(const Value& key) const;
  // Inserts, or replaces the value in place. TypeError for an unhashable key.
  absl::Status Set(Value key, Value value);
  int depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
  absl::flat_hash_map<std::string, size_t> index_;
};

class Renderer;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Runtime objects: namespaces, loop contexts, macros, functions, methods.
class Object {
 public:
  virtual ~Object() = default;
  // Python's name of the type, for messages ("Namespace", "function").
  virtual std::string_view type_name() const = 0;
  // How Jinja2 names it in "'... object' has no attribute 'x'".
  virtual std::string type_repr() const;
  // The attribute, or an Undefined saying it is missing; errors only where
  // computing it fails (a loop's length runs its filter).
  virtual absl::StatusOr<Value> GetAttr(std::string_view name) const;
  virtual bool callable() const { return false; }
  // TypeError unless callable.
  virtual absl::StatusOr<Value> Call(Renderer& renderer, CallArgs args) const;
  // str() of the object.
  virtual std::string Repr() const;
  // Only a namespace accepts `{% set ns.attr = value %}`.
  virtual absl::Status SetAttr(std::string_view name, Value value);
  // The attributes a namespace holds, in order (tojson refuses others).
  virtual const Dict* namespace_attributes() const { return nullptr; }
};

// Python semantics.
bool Truthy(const Value& v);
// ==, with 1 == 1.0 == True; lists and dicts compare deeply. Undefined
// equals only Undefined.
bool Equals(const Value& a, const Value& b);
// type(v).__name__: "str", "int", "NoneType", "list", "dict object" is
// ObjectTypeRepr.
std::string PyTypeName(const Value& v);
// How Jinja2 names an object in "'dict object' has no attribute 'x'".
std::string ObjectTypeRepr(const Value& v);
// The dict key of a hashable value; TypeError (unhashable type) otherwise.
absl::StatusOr<std::string> HashKey(const Value& v);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_VALUE_H_
