#include "chat/jinja/fold.h"

#include <algorithm>
#include <string_view>

#include "chat/jinja/py_format.h"
#include "chat/jinja/renderer.h"

namespace cairn::jinja {

namespace {

// Filters Jinja2 passes its context to: never folded.
constexpr std::string_view kContextFilters[] = {"map", "select", "reject", "selectattr", "rejectattr", "random"};

bool Foldable(const Expr* e);

bool AllFoldable(const std::vector<ExprPtr>& exprs) {
  return std::all_of(exprs.begin(), exprs.end(), [](const ExprPtr& x) { return Foldable(x.get()); });
}

// Whether Jinja2's as_const can evaluate the expression: literals, and the
// operators, lookups, filters and tests over them (not names or calls).
bool Foldable(const Expr* e) {
  if (e == nullptr) return true;
  switch (e->kind) {
    case ExprKind::kConst:
      return true;
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict:
    case ExprKind::kNeg:
    case ExprKind::kPos:
    case ExprKind::kNot:
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kCompare:
    case ExprKind::kConcat:
    case ExprKind::kCond:
    case ExprKind::kGetattr:
    case ExprKind::kGetitem:
    case ExprKind::kSlice:
      return Foldable(e->a.get()) && Foldable(e->b.get()) && Foldable(e->c.get()) && AllFoldable(e->items);
    case ExprKind::kFilter:
    case ExprKind::kTest:
      if (e->unknown || e->a == nullptr || e->args.star || e->args.star_star) return false;
      if (e->kind == ExprKind::kFilter &&
          std::find(std::begin(kContextFilters), std::end(kContextFilters), e->name) != std::end(kContextFilters)) {
        return false;
      }
      return Foldable(e->a.get()) && AllFoldable(e->args.positional) &&
             std::all_of(e->args.keyword.begin(), e->args.keyword.end(),
                         [](const auto& kw) { return Foldable(kw.second.get()); });
    default:
      return false;
  }
}

// has_safe_repr: what Jinja2 accepts as a folded constant.
bool Safe(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNone:
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kFloat:
    case ValueKind::kString:
      return true;
    case ValueKind::kList:
      if (v.is_generator() || (!v.list().python_type.empty() && v.list().python_type != "range")) return false;
      return std::all_of(v.items().begin(), v.items().end(), Safe);
    case ValueKind::kDict:
      return std::all_of(v.dict().entries().begin(), v.dict().entries().end(),
                         [](const auto& kv) { return Safe(kv.first) && Safe(kv.second); });
    default:
      return false;
  }
}

class Folder {
 public:
  Folder() {
    // Folding must stay cheap: a constant too costly to fold is left for
    // the render (and its limits).
    input_.limits.max_steps = 10'000;
    input_.limits.max_output_bytes = 1 << 16;
    input_.limits.max_call_depth = 4;
  }

  void Fold(Expr& e) {
    for (Expr* child : {e.a.get(), e.b.get(), e.c.get(), e.args.star.get(), e.args.star_star.get()}) {
      if (child != nullptr) Fold(*child);
    }
    for (ExprPtr& item : e.items) Fold(*item);
    for (ExprPtr& arg : e.args.positional) Fold(*arg);
    for (auto& [name, arg] : e.args.keyword) Fold(*arg);
    if (e.kind == ExprKind::kConst || e.kind == ExprKind::kSlice || !Foldable(&e)) return;
    absl::StatusOr<Value> v = Evaluate(e);
    if (!v.ok() || !Safe(*v)) return;
    Expr folded;
    folded.kind = ExprKind::kConst;
    folded.line = e.line;
    folded.value = *std::move(v);
    e = std::move(folded);
  }

  absl::StatusOr<Value> Evaluate(const Expr& e) {
    Renderer renderer(input_);
    return renderer.Fold(e);
  }

  // Jinja2 writes out a printed constant at compile time, whatever its
  // value (an Undefined prints empty).
  void FoldPrint(Stmt& s) {
    if (!Foldable(s.expr.get())) return;
    absl::StatusOr<Value> v = Evaluate(*s.expr);
    if (!v.ok()) return;
    s.kind = StmtKind::kData;
    s.text = ToStr(*v);
    s.expr.reset();
  }

  void Fold(Body& body) {
    for (auto& s : body) Fold(*s);
  }

  void Fold(Stmt& s) {
    for (Expr* e : {s.expr.get(), s.condition.get(), s.filter.get()}) {
      if (e != nullptr) Fold(*e);
    }
    if (s.kind == StmtKind::kPrint) FoldPrint(s);
    for (auto& [condition, body] : s.branches) {
      Fold(*condition);
      Fold(body);
    }
    for (auto& [target, value] : s.assignments) Fold(*value);
    if (s.macro != nullptr) {
      for (ExprPtr& d : s.macro->defaults) Fold(*d);
      Fold(s.macro->body);
    }
    Fold(s.body);
    Fold(s.else_body);
  }

 private:
  RenderInput input_;
};

}  // namespace

void FoldConstants(Body& body) { Folder().Fold(body); }

}  // namespace cairn::jinja
