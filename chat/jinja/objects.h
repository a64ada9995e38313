// The runtime objects templates handle (internal): namespaces, loop
// contexts, macros, functions and bound methods, cyclers and joiners, each
// as Jinja2 defines them (utils.Namespace, runtime.LoopContext, Macro ...).
#ifndef CAIRN_CHAT_JINJA_OBJECTS_H_
#define CAIRN_CHAT_JINJA_OBJECTS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/value.h"

namespace cairn::jinja {

// namespace(...): the one object `{% set ns.attr = value %}` may change.
class NamespaceObject final : public Object {
 public:
  explicit NamespaceObject(Dict attributes) : attributes_(std::move(attributes)) {}
  std::string_view type_name() const override { return "Namespace"; }
  std::string type_repr() const override { return "jinja2.utils.Namespace object"; }
  absl::StatusOr<Value> GetAttr(std::string_view name) const override;
  std::string Repr() const override;
  absl::Status SetAttr(std::string_view name, Value value) override;
  const Dict* namespace_attributes() const override { return &attributes_; }
  void Clear() { attributes_ = Dict(); }

 private:
  Dict attributes_;
  // A namespace can hold itself: printing it again shows {...}, as Python.
  mutable bool printing_ = false;
};

// A for loop's progress, shared by its iterations' `loop` objects. The
// loop's `if` filter runs lazily, as in Jinja2: an item is examined when the
// loop reaches it or when length, last, revindex or nextitem look ahead.
struct LoopState {
  Renderer* renderer = nullptr;
  const Stmt* stmt = nullptr;
  FramePtr frame;  // where the loop is written (recursive calls run there)
  std::vector<Value> source;
  size_t next_source = 0;
  std::vector<Value> items;  // the items the filter accepted so far
  int depth0 = 0;
  bool changed_seen = false;
  Value last_changed;

  // Examines source items until `count` are accepted or none is left.
  absl::Status Fill(size_t count);
  absl::StatusOr<size_t> Length();
};

// `loop` inside an iteration.
class LoopObject final : public Object {
 public:
  LoopObject(std::shared_ptr<LoopState> state, size_t index0) : state_(std::move(state)), index0_(index0) {}
  std::string_view type_name() const override { return "LoopContext"; }
  std::string type_repr() const override { return "jinja2.runtime.LoopContext object"; }
  absl::StatusOr<Value> GetAttr(std::string_view name) const override;
  bool callable() const override { return true; }
  // loop(items): a recursive loop's body over `items`.
  absl::StatusOr<Value> Call(Renderer& renderer, CallArgs args) const override;
  std::string Repr() const override;

 private:
  std::shared_ptr<LoopState> state_;
  size_t index0_;
};

// A macro (or a call block's caller) with the frame it was defined in.
class MacroObject final : public Object {
 public:
  MacroObject(const MacroDef* def, FramePtr closure) : def_(def), closure_(std::move(closure)) {}
  std::string_view type_name() const override { return "Macro"; }
  std::string type_repr() const override { return "jinja2.runtime.Macro object"; }
  absl::StatusOr<Value> GetAttr(std::string_view name) const override;
  bool callable() const override { return true; }
  absl::StatusOr<Value> Call(Renderer& renderer, CallArgs args) const override;
  std::string Repr() const override;

 private:
  const MacroDef* def_;
  FramePtr closure_;
};

// A builtin function or bound method (range, str.strip, loop.cycle ...).
class FunctionObject final : public Object {
 public:
  using Fn = std::function<absl::StatusOr<Value>(Renderer&, CallArgs)>;
  FunctionObject(std::string name, bool method, Fn fn) : name_(std::move(name)), method_(method), fn_(std::move(fn)) {}
  std::string_view type_name() const override { return method_ ? "builtin_function_or_method" : "function"; }
  bool callable() const override { return true; }
  absl::StatusOr<Value> Call(Renderer& renderer, CallArgs args) const override {
    return fn_(renderer, std::move(args));
  }
  std::string Repr() const override;

 private:
  std::string name_;
  bool method_;
  Fn fn_;
};

Value MakeFunction(std::string name, FunctionObject::Fn fn);
Value MakeMethod(std::string name, FunctionObject::Fn fn);

// cycler(a, b, ...): .next(), .current, .reset().
class CyclerObject final : public Object {
 public:
  explicit CyclerObject(std::vector<Value> items) : items_(std::move(items)) {}
  std::string_view type_name() const override { return "Cycler"; }
  std::string type_repr() const override { return "jinja2.utils.Cycler object"; }
  absl::StatusOr<Value> GetAttr(std::string_view name) const override;

 private:
  std::vector<Value> items_;
  std::shared_ptr<size_t> pos_ = std::make_shared<size_t>(0);
};

// joiner(sep): "" on the first call, sep afterwards.
class JoinerObject final : public Object {
 public:
  explicit JoinerObject(Value sep) : sep_(std::move(sep)) {}
  std::string_view type_name() const override { return "Joiner"; }
  std::string type_repr() const override { return "jinja2.utils.Joiner object"; }
  bool callable() const override { return true; }
  absl::StatusOr<Value> Call(Renderer& renderer, CallArgs args) const override;

 private:
  Value sep_;
  std::shared_ptr<bool> used_ = std::make_shared<bool>(false);
};

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_OBJECTS_H_
