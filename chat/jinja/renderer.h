// One render's state: variable frames, output buffers, limits and marks
// (internal to the interpreter; template.h is the interface). Not
// thread-safe: one Renderer per render.
//
// Scoping follows Jinja2: a for loop's iteration, a macro call, a caller, a
// with block and a block set each get a frame of their own, whose parent is
// the frame they were written in (a macro's is where it was defined, read at
// call time); `set` writes the current frame, lookups walk the parents, then
// the globals (range, namespace, ...).
#ifndef CAIRN_CHAT_JINJA_RENDERER_H_
#define CAIRN_CHAT_JINJA_RENDERER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/template.h"
#include "chat/jinja/value.h"

namespace cairn::jinja {

class Frame;
using FramePtr = std::shared_ptr<Frame>;

class Frame {
 public:
  explicit Frame(FramePtr parent) : parent_(std::move(parent)) {}
  // The variable in this frame or a parent's; nullptr when none.
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
  // Drops the variables (breaking a macro's reference to its own frame).
  void Clear() { vars_.clear(); }

 private:
  FramePtr parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

struct LoopState;
class NamespaceObject;

class Renderer {
 public:
  explicit Renderer(const RenderInput& input);
  // Breaks the reference cycles a render may leave (a macro in the frame it
  // closes over, a namespace holding itself), so that nothing outlives it.
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // `write_offsets`, when given, receives where each write to the output
  // begins (Template::Render).
  absl::StatusOr<Text> Run(const Body& body, std::vector<size_t>* write_offsets = nullptr);
  // Evaluates a constant expression as Jinja2's optimizer does (fold.h).
  absl::StatusOr<Value> Fold(const Expr& e);

  // For builtins and runtime objects.
  // Counts evaluation work; RESOURCE_EXHAUSTED past the step or time limit.
  absl::Status Step(int64_t n = 1);
  // Before building a string or list of `bytes`: RESOURCE_EXHAUSTED past the
  // output limit or the bytes a render may build in all.
  absl::Status Charge(size_t bytes);
  // The items a for loop would see: list items, dict keys, characters.
  // Consumes a generator. TypeError for what Python cannot iterate.
  absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
  absl::StatusOr<Value> Call(const Value& callee, CallArgs args);
  absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, CallArgs args);
  absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, CallArgs args);
  absl::CivilSecond Now() const;
  size_t OutputLimit() const { return input_.limits.max_output_bytes; }
  // A namespace created during the render (cleared when it ends).
  void Own(const std::shared_ptr<NamespaceObject>& ns) { namespaces_.push_back(ns); }
  // A macro's or caller's call, in a frame whose parent is `closure`.
  absl::StatusOr<Value> CallMacro(const MacroDef& def, const FramePtr& closure, CallArgs args);
  // loop(items) inside a recursive loop.
  absl::StatusOr<Value> CallLoop(const LoopState& loop, const Value& items);
  // Evaluates the for-if condition of `stmt` for `item` (lazy loop filters).
  absl::StatusOr<bool> LoopAccepts(const Stmt& stmt, const FramePtr& frame, const Value& item);

 private:
  // Statements (renderer.cc).
  absl::Status Exec(const Body& body, const FramePtr& frame, Flow* flow);
  absl::Status ExecStmt(const Stmt& s, const FramePtr& frame, Flow* flow);
  absl::Status ExecIf(const Stmt& s, const FramePtr& frame, Flow* flow);
  absl::Status ExecFor(const Stmt& s, const FramePtr& frame, const Value& iterable, int depth0, Flow* flow);
  absl::Status ExecIteration(const Stmt& s, const FramePtr& frame, const std::shared_ptr<LoopState>& state,
                             size_t index, Flow* flow);
  absl::Status ExecSetBlock(const Stmt& s, const FramePtr& frame);
  absl::Status ExecFilterBlock(const Stmt& s, const FramePtr& frame);
  absl::Status ExecCallBlock(const Stmt& s, const FramePtr& frame);
  absl::Status ExecWith(const Stmt& s, const FramePtr& frame, Flow* flow);
  absl::Status Assign(const Target& target, const Value& value, const FramePtr& frame);
  absl::StatusOr<Text> Capture(const Body& body, const FramePtr& frame);
  absl::Status Write(const Text& text);

  // Expressions (eval.cc).
  absl::StatusOr<Value> Eval(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalNode(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalName(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalGetitem(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCall(const Expr& e, const FramePtr& frame, const Value* caller);
  absl::StatusOr<Value> EvalFilter(const Expr& e, const FramePtr& frame, const Value* block_input);
  absl::StatusOr<Value> EvalTest(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCollection(const Expr& e, const FramePtr& frame);
  absl::StatusOr<CallArgs> EvalArgs(const ArgsExpr& args, const FramePtr& frame);

  struct Buffer {
    Text text;
    uint64_t id;
  };
  // A for-loop iteration bound to a tracked object; it marks each buffer
  // it first writes non-whitespace to.
  struct Binding {
    int object;
    std::vector<uint64_t> marked;
  };

  const RenderInput& input_;
  std::vector<std::weak_ptr<Frame>> closure_frames_;
  std::vector<std::weak_ptr<NamespaceObject>> namespaces_;
  absl::flat_hash_map<const void*, int> tracked_;
  std::vector<Buffer> buffers_;
  std::vector<size_t>* write_offsets_ = nullptr;
  uint64_t next_buffer_id_ = 0;
  std::vector<Binding> bindings_;
  int64_t steps_ = 0;
  size_t built_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  bool folding_ = false;
  absl::Time deadline_;
};

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_RENDERER_H_
