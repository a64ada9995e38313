#include "chat/jinja/objects.h"

#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

absl::StatusOr<Value> NamespaceObject::GetAttr(std::string_view name) const {
  if (const Value* v = attributes_.Find(Value::String(std::string(name)))) return *v;
  return Object::GetAttr(name);
}

std::string NamespaceObject::Repr() const {
  if (printing_) return "<Namespace {...}>";
  printing_ = true;
  std::string out = Cat("<Namespace ", ToRepr(Value::FromDict(attributes_)), ">");
  printing_ = false;
  return out;
}

absl::Status NamespaceObject::SetAttr(std::string_view name, Value value) {
  return attributes_.Set(Value::String(std::string(name)), std::move(value));
}

absl::Status LoopState::Fill(size_t count) {
  while (items.size() < count && next_source < source.size()) {
    const Value& item = source[next_source++];
    bool accepted = true;
    if (stmt->condition != nullptr) {
      JINJA_ASSIGN_OR_RETURN(accepted, renderer->LoopAccepts(*stmt, frame, item));
    }
    if (accepted) items.push_back(item);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> LoopState::Length() {
  JINJA_RETURN_IF_ERROR(Fill(std::numeric_limits<size_t>::max()));
  return items.size();
}

absl::StatusOr<Value> LoopObject::GetAttr(std::string_view name) const {
  const int64_t index0 = static_cast<int64_t>(index0_);
  if (name == "index0") return Value::Int(index0);
  if (name == "index") return Value::Int(index0 + 1);
  if (name == "first") return Value::Bool(index0_ == 0);
  if (name == "depth") return Value::Int(state_->depth0 + 1);
  if (name == "depth0") return Value::Int(state_->depth0);
  if (name == "previtem") {
    if (index0_ == 0) return Value::Undefined("there is no previous item");
    return state_->items[index0_ - 1];
  }
  if (name == "last" || name == "nextitem") {
    JINJA_RETURN_IF_ERROR(state_->Fill(index0_ + 2));
    const bool has_next = state_->items.size() > index0_ + 1;
    if (name == "last") return Value::Bool(!has_next);
    return has_next ? state_->items[index0_ + 1] : Value::Undefined("there is no next item");
  }
  if (name == "length" || name == "revindex" || name == "revindex0") {
    JINJA_ASSIGN_OR_RETURN(const size_t length, state_->Length());
    const int64_t n = static_cast<int64_t>(length);
    if (name == "length") return Value::Int(n);
    return Value::Int(name == "revindex" ? n - index0 : n - index0 - 1);
  }
  if (name == "cycle") {
    return MakeMethod("cycle", [index0](Renderer&, CallArgs args) -> absl::StatusOr<Value> {
      if (args.positional.empty()) return TypeError("no items for cycling given");
      return args.positional[index0 % static_cast<int64_t>(args.positional.size())];
    });
  }
  if (name == "changed") {
    std::shared_ptr<LoopState> state = state_;
    return MakeMethod("changed", [state](Renderer&, CallArgs args) -> absl::StatusOr<Value> {
      Value current = Value::List(std::move(args.positional), ListKind::kTuple);
      if (state->changed_seen && Equals(current, state->last_changed)) return Value::Bool(false);
      state->changed_seen = true;
      state->last_changed = std::move(current);
      return Value::Bool(true);
    });
  }
  return Object::GetAttr(name);
}

absl::StatusOr<Value> LoopObject::Call(Renderer& renderer, CallArgs args) const {
  if (!state_->stmt->recursive) return TypeError("The loop must be marked as 'recursive' to call it.");
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("loop", args, {"iterable"}, 1));
  return renderer.CallLoop(*state_, a[0]);
}

std::string LoopObject::Repr() const {
  auto length = state_->Length();
  return Cat("<LoopContext ", index0_ + 1, "/", length.ok() ? *length : 0, ">");
}

absl::StatusOr<Value> MacroObject::GetAttr(std::string_view name) const {
  if (name == "name") return Value::String(def_->name);
  if (name == "arguments") {
    std::vector<Value> params;
    for (const std::string& p : def_->params) params.push_back(Value::String(p));
    return Value::List(std::move(params), ListKind::kTuple);
  }
  if (name == "catch_kwargs") return Value::Bool(def_->uses_kwargs);
  if (name == "catch_varargs") return Value::Bool(def_->uses_varargs);
  if (name == "caller") return Value::Bool(def_->uses_caller);
  return Object::GetAttr(name);
}

absl::StatusOr<Value> MacroObject::Call(Renderer& renderer, CallArgs args) const {
  return renderer.CallMacro(*def_, closure_, std::move(args));
}

std::string MacroObject::Repr() const { return Cat("<Macro '", def_->name, "'>"); }

std::string FunctionObject::Repr() const {
  return method_ ? Cat("<built-in method ", name_, ">") : Cat("<function ", name_, ">");
}

Value MakeFunction(std::string name, FunctionObject::Fn fn) {
  return Value::FromObject(std::make_shared<FunctionObject>(std::move(name), false, std::move(fn)));
}

Value MakeMethod(std::string name, FunctionObject::Fn fn) {
  return Value::FromObject(std::make_shared<FunctionObject>(std::move(name), true, std::move(fn)));
}

absl::StatusOr<Value> CyclerObject::GetAttr(std::string_view name) const {
  const std::vector<Value> items = items_;
  std::shared_ptr<size_t> pos = pos_;
  if (name == "current") return items.empty() ? Value::None() : items[*pos % items.size()];
  if (name == "next") {
    return MakeMethod("next", [items, pos](Renderer&, CallArgs) -> absl::StatusOr<Value> {
      if (items.empty()) return Value::None();
      Value v = items[*pos % items.size()];
      *pos = (*pos + 1) % items.size();
      return v;
    });
  }
  if (name == "reset") {
    return MakeMethod("reset", [pos](Renderer&, CallArgs) -> absl::StatusOr<Value> {
      *pos = 0;
      return Value::None();
    });
  }
  return Object::GetAttr(name);
}

absl::StatusOr<Value> JoinerObject::Call(Renderer&, CallArgs) const {
  if (!*used_) {
    *used_ = true;
    return Value::String("");
  }
  return sep_;
}

}  // namespace cairn::jinja
