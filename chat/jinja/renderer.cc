// Statements: output, control flow, assignments, macros and calls, limits
// and the marks of tracked objects.
#include "chat/jinja/renderer.h"

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/nesting.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

// Nesting of statements and expressions being evaluated: bounds the native
// stack whatever a template does.
constexpr int kMaxRenderDepth = 1000;

size_t FirstNonSpace(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return i;
  }
  return std::string_view::npos;
}

}  // namespace

const Value* Frame::Find(std::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent_.get()) {
    for (auto it = f->vars_.rbegin(); it != f->vars_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
  }
  return nullptr;
}

void Frame::Set(std::string_view name, Value value) {
  for (auto& [key, v] : vars_) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

Renderer::Renderer(const RenderInput& input) : input_(input) {
  for (size_t i = 0; i < input.tracked.size(); ++i) {
    if (input.tracked[i].identity() != nullptr) tracked_.emplace(input.tracked[i].identity(), static_cast<int>(i));
  }
  deadline_ = absl::Now() + input.limits.max_time;
}

Renderer::~Renderer() {
  for (const auto& weak : closure_frames_) {
    if (auto frame = weak.lock()) frame->Clear();
  }
  for (const auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->Clear();
  }
}

absl::StatusOr<Text> Renderer::Run(const Body& body, std::vector<size_t>* write_offsets) {
  write_offsets_ = write_offsets;
  auto root = std::make_shared<Frame>(nullptr);
  for (const auto& [name, value] : input_.variables) root->Set(name, value);
  buffers_.push_back({Text(), next_buffer_id_++});
  Flow flow = Flow::kNormal;
  JINJA_RETURN_IF_ERROR(Exec(body, root, &flow));
  return std::move(buffers_.back().text);
}

absl::StatusOr<Value> Renderer::Fold(const Expr& e) {
  folding_ = true;
  buffers_.push_back({Text(), next_buffer_id_++});
  return Eval(e, std::make_shared<Frame>(nullptr));
}

absl::Status Renderer::Step(int64_t n) {
  steps_ += n;
  if (steps_ > input_.limits.max_steps) {
    return LimitExceeded(Cat("more than ", input_.limits.max_steps, " evaluation steps"));
  }
  if ((steps_ & 1023) < n && absl::Now() > deadline_) {
    return LimitExceeded(Cat("rendering took longer than ", absl::FormatDuration(input_.limits.max_time)));
  }
  return absl::OkStatus();
}

absl::Status Renderer::Charge(size_t bytes) {
  const size_t limit = input_.limits.max_output_bytes;
  if (bytes > limit) return LimitExceeded(Cat("a string or list of ", bytes, " bytes (the limit is ", limit, ")"));
  built_ += bytes;
  // Strings are rebuilt as templates concatenate; bound the bytes built in
  // all, which bounds memory and time whatever the template keeps.
  if (built_ > 16 * limit) return LimitExceeded(Cat("more than ", 16 * limit, " bytes of strings built"));
  return absl::OkStatus();
}

absl::CivilSecond Renderer::Now() const {
  if (input_.now) return input_.now();
  return absl::ToCivilSecond(absl::Now(), absl::LocalTimeZone());
}

absl::Status Renderer::Write(const Text& text) {
  Buffer& buffer = buffers_.back();
  if (buffer.text.size() + text.size() > input_.limits.max_output_bytes) {
    return LimitExceeded(Cat("output larger than ", input_.limits.max_output_bytes, " bytes"));
  }
  if (!bindings_.empty()) {
    if (const size_t first = FirstNonSpace(text.bytes()); first != std::string_view::npos) {
      for (Binding& b : bindings_) {
        if (std::find(b.marked.begin(), b.marked.end(), buffer.id) != b.marked.end()) continue;
        b.marked.push_back(buffer.id);
        // Text rendered for this object elsewhere (a macro) carries its mark.
        const bool carried = std::any_of(text.marks().begin(), text.marks().end(),
                                         [&](const ObjectMark& m) { return m.object == b.object; });
        if (!carried) buffer.text.AddMark(buffer.text.size() + first, b.object);
      }
    }
  }
  if (write_offsets_ != nullptr && buffers_.size() == 1 && !text.empty()) write_offsets_->push_back(buffer.text.size());
  buffer.text.Append(text);
  return absl::OkStatus();
}

absl::StatusOr<Text> Renderer::Capture(const Body& body, const FramePtr& frame) {
  buffers_.push_back({Text(), next_buffer_id_++});
  Flow flow = Flow::kNormal;
  absl::Status status = Exec(body, frame, &flow);
  Text text = std::move(buffers_.back().text);
  buffers_.pop_back();
  if (!status.ok()) return status;
  return text;
}

absl::Status Renderer::Exec(const Body& body, const FramePtr& frame, Flow* flow) {
  NestingGuard guard(&depth_);
  if (depth_ > kMaxRenderDepth) return LimitExceeded(Cat("nesting deeper than ", kMaxRenderDepth, " levels"));
  for (const auto& stmt : body) {
    JINJA_RETURN_IF_ERROR(WithLine(ExecStmt(*stmt, frame, flow), stmt->line));
    if (*flow != Flow::kNormal) break;
  }
  return absl::OkStatus();
}

absl::Status Renderer::ExecStmt(const Stmt& s, const FramePtr& frame, Flow* flow) {
  JINJA_RETURN_IF_ERROR(Step());
  switch (s.kind) {
    case StmtKind::kData:
      return Write(Text(s.text));
    case StmtKind::kPrint: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
      return Write(ToText(v));
    }
    case StmtKind::kIf:
      return ExecIf(s, frame, flow);
    case StmtKind::kFor: {
      JINJA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, frame));
      return ExecFor(s, frame, iterable, 0, flow);
    }
    case StmtKind::kSet: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
      return Assign(s.target, v, frame);
    }
    case StmtKind::kSetBlock:
      return ExecSetBlock(s, frame);
    case StmtKind::kMacro:
      frame->Set(s.macro->name, Value::FromObject(std::make_shared<MacroObject>(s.macro.get(), frame)));
      closure_frames_.push_back(frame);
      return absl::OkStatus();
    case StmtKind::kCallBlock:
      return ExecCallBlock(s, frame);
    case StmtKind::kFilterBlock:
      return ExecFilterBlock(s, frame);
    case StmtKind::kWith:
      return ExecWith(s, frame, flow);
    case StmtKind::kBreak:
      *flow = Flow::kBreak;
      return absl::OkStatus();
    case StmtKind::kContinue:
      *flow = Flow::kContinue;
      return absl::OkStatus();
    case StmtKind::kScope:
      if (!s.own_frame) return Exec(s.body, frame, flow);
      return Exec(s.body, std::make_shared<Frame>(frame), flow);
  }
  return absl::OkStatus();
}

absl::Status Renderer::ExecIf(const Stmt& s, const FramePtr& frame, Flow* flow) {
  for (const auto& [condition, body] : s.branches) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*condition, frame));
    if (Truthy(v)) return Exec(body, frame, flow);
  }
  return Exec(s.else_body, frame, flow);
}

absl::Status Renderer::ExecFor(const Stmt& s, const FramePtr& frame, const Value& iterable, int depth0, Flow* flow) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  auto state = std::make_shared<LoopState>();
  state->renderer = this;
  state->stmt = &s;
  state->frame = frame;
  state->source = std::move(items);
  state->depth0 = depth0;
  size_t index = 0;
  absl::Status status = absl::OkStatus();
  while (status.ok()) {
    status = state->Fill(index + 1);
    if (!status.ok() || state->items.size() <= index) break;
    Flow body_flow = Flow::kNormal;
    status = ExecIteration(s, frame, state, index, &body_flow);
    if (body_flow == Flow::kBreak) break;
    ++index;
  }
  state->last_changed = Value();  // may hold the loop itself
  JINJA_RETURN_IF_ERROR(status);
  if (index == 0 && state->items.empty()) return Exec(s.else_body, frame, flow);
  return absl::OkStatus();
}

absl::Status Renderer::ExecIteration(const Stmt& s, const FramePtr& frame, const std::shared_ptr<LoopState>& state,
                                     size_t index, Flow* flow) {
  JINJA_RETURN_IF_ERROR(Step());
  auto iteration = std::make_shared<Frame>(frame);
  const Value& item = state->items[index];
  JINJA_RETURN_IF_ERROR(Assign(s.target, item, iteration));
  iteration->Set("loop", Value::FromObject(std::make_shared<LoopObject>(state, index)));
  auto tracked = item.is_dict() ? tracked_.find(item.identity()) : tracked_.end();
  if (tracked != tracked_.end()) bindings_.push_back({tracked->second, {}});
  absl::Status status = Exec(s.body, iteration, flow);
  if (tracked != tracked_.end()) bindings_.pop_back();
  return status;
}

absl::StatusOr<bool> Renderer::LoopAccepts(const Stmt& stmt, const FramePtr& frame, const Value& item) {
  auto scope = std::make_shared<Frame>(frame);
  JINJA_RETURN_IF_ERROR(Assign(stmt.target, item, scope));
  JINJA_ASSIGN_OR_RETURN(Value v, Eval(*stmt.condition, scope));
  return Truthy(v);
}

absl::StatusOr<Value> Renderer::CallLoop(const LoopState& loop, const Value& items) {
  NestingGuard guard(&call_depth_);
  if (call_depth_ > input_.limits.max_call_depth) {
    return LimitExceeded(Cat("calls nested deeper than ", input_.limits.max_call_depth));
  }
  buffers_.push_back({Text(), next_buffer_id_++});
  Flow flow = Flow::kNormal;
  absl::Status status = ExecFor(*loop.stmt, loop.frame, items, loop.depth0 + 1, &flow);
  Text text = std::move(buffers_.back().text);
  buffers_.pop_back();
  if (!status.ok()) return status;
  return Value::String(std::move(text));
}

absl::Status Renderer::Assign(const Target& target, const Value& value, const FramePtr& frame) {
  switch (target.kind) {
    case Target::Kind::kName:
      frame->Set(target.name, value);
      return absl::OkStatus();
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = frame->Find(target.name);
      if (ns == nullptr || !ns->is_object() || ns->object()->namespace_attributes() == nullptr) {
        return TemplateFailure(kRuntimeError, "cannot assign attribute on non-namespace object");
      }
      return ns->object()->SetAttr(target.attr, value);
    }
    case Target::Kind::kTuple: {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
      const size_t n = target.items.size();
      if (items.size() > n) return ValueError(Cat("too many values to unpack (expected ", n, ")"));
      if (items.size() < n) {
        return ValueError(Cat("not enough values to unpack (expected ", n, ", got ", items.size(), ")"));
      }
      for (size_t i = 0; i < n; ++i) JINJA_RETURN_IF_ERROR(Assign(target.items[i], items[i], frame));
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status Renderer::ExecSetBlock(const Stmt& s, const FramePtr& frame) {
  JINJA_ASSIGN_OR_RETURN(Text text, Capture(s.body, std::make_shared<Frame>(frame)));
  Value value = Value::String(std::move(text));
  if (s.filter != nullptr) {
    JINJA_ASSIGN_OR_RETURN(value, EvalFilter(*s.filter, frame, &value));
  }
  return Assign(s.target, value, frame);
}

absl::Status Renderer::ExecFilterBlock(const Stmt& s, const FramePtr& frame) {
  JINJA_ASSIGN_OR_RETURN(Text text, Capture(s.body, std::make_shared<Frame>(frame)));
  const Value body = Value::String(std::move(text));
  JINJA_ASSIGN_OR_RETURN(Value value, EvalFilter(*s.filter, frame, &body));
  return Write(ToText(value));
}

absl::Status Renderer::ExecCallBlock(const Stmt& s, const FramePtr& frame) {
  const Value caller = Value::FromObject(std::make_shared<MacroObject>(s.macro.get(), frame));
  JINJA_ASSIGN_OR_RETURN(Value v, EvalCall(*s.expr, frame, &caller));
  return Write(ToText(v));
}

absl::Status Renderer::ExecWith(const Stmt& s, const FramePtr& frame, Flow* flow) {
  auto inner = std::make_shared<Frame>(frame);
  for (const auto& [target, expr] : s.assignments) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
    JINJA_RETURN_IF_ERROR(Assign(target, v, inner));
  }
  return Exec(s.body, inner, flow);
}

absl::StatusOr<Value> Renderer::CallMacro(const MacroDef& def, const FramePtr& closure, CallArgs args) {
  NestingGuard guard(&call_depth_);
  if (call_depth_ > input_.limits.max_call_depth) {
    return LimitExceeded(Cat("calls nested deeper than ", input_.limits.max_call_depth));
  }
  auto frame = std::make_shared<Frame>(closure);
  const size_t n = def.params.size();
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < std::min(n, args.positional.size()); ++i) {
    frame->Set(def.params[i], args.positional[i]);
    given[i] = true;
  }
  if (args.positional.size() > n && !def.uses_varargs) {
    return TypeError(Cat("macro '", def.name, "' takes not more than ", n, " argument(s)"));
  }
  std::optional<Value> caller;
  Dict kwargs;
  for (auto& [key, value] : args.keyword) {
    auto it = std::find(def.params.begin(), def.params.end(), key);
    const size_t i = static_cast<size_t>(it - def.params.begin());
    if (it != def.params.end() && !given[i] && args.positional.size() < n) {
      frame->Set(key, value);
      given[i] = true;
    } else if (key == "caller" && def.uses_caller) {
      caller = value;
    } else if (def.uses_kwargs) {
      JINJA_RETURN_IF_ERROR(kwargs.Set(Value::String(key), value));
    } else if (key == "caller") {
      return TypeError(
          Cat("macro '", def.name,
              "' was invoked with two values for the special caller argument. This is most likely a bug."));
    } else {
      return TypeError(Cat("macro '", def.name, "' takes no keyword argument '", key, "'"));
    }
  }
  const size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    if (i >= first_default) {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*def.defaults[i - first_default], frame));
      frame->Set(def.params[i], std::move(v));
    } else {
      frame->Set(def.params[i], Value::Undefined(Cat("parameter '", def.params[i], "' was not provided")));
    }
  }
  if (def.uses_caller) frame->Set("caller", caller.value_or(Value::Undefined("No caller defined")));
  if (def.uses_varargs) {
    std::vector<Value> rest;
    if (args.positional.size() > n) rest.assign(args.positional.begin() + n, args.positional.end());
    frame->Set("varargs", Value::List(std::move(rest), ListKind::kTuple));
  }
  if (def.uses_kwargs) frame->Set("kwargs", Value::FromDict(std::move(kwargs)));
  JINJA_ASSIGN_OR_RETURN(Text text, Capture(def.body, frame));
  return Value::String(std::move(text));
}

}  // namespace cairn::jinja
