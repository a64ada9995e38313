// The syntax tree the parser builds and the renderer walks: expressions and
// statements of Jinja2's language. Owned by the Template; immutable after
// parsing, so one tree serves concurrent renders.
#ifndef CAIRN_CHAT_JINJA_AST_H_
#define CAIRN_CHAT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace cairn::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class ExprKind : uint8_t {
  kConst,    // value
  kName,     // name
  kGetattr,  // a.name
  kGetitem,  // a[b]
  kSlice,    // a:b:c inside [] (each may be null)
  kCall,     // a(args)
  kFilter,   // a | name(args); a is null for a filter block's chain start
  kTest,     // a is name(args)
  kNeg,      // -a
  kPos,      // +a
  kNot,      // not a
  kBinary,   // a op b
  kAnd,      // a and b
  kOr,       // a or b
  kCompare,  // items[0] ops[0] items[1] ops[1] ... (chained)
  kConcat,   // items joined by ~
  kCond,     // b if a else c (c may be null)
  kList,     // [items]
  kTuple,    // (items)
  kDict,     // {items[0]: items[1], ...}
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct ArgsExpr {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;       // *args
  ExprPtr star_star;  // **kwargs
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  BinaryOp op = BinaryOp::kAdd;
  std::vector<ExprPtr> items;
  std::vector<CompareOp> ops;
  ArgsExpr args;
  // A filter or test the parser did not know, inside an if or a
  // conditional expression: an error only if evaluated (as in Jinja2).
  bool unknown = false;
};

// The left side of an assignment or a loop variable.
struct Target {
  enum class Kind : uint8_t { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;           // kName, kNamespaceAttr (the namespace)
  std::string attr;           // kNamespaceAttr
  std::vector<Target> items;  // kTuple
};

// A macro, or the body of a call block (the caller).
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  // Defaults of the last params (defaults.size() <= params.size()).
  std::vector<ExprPtr> defaults;
  Body body;
  int line = 0;
  // Whether the body refers to these names (Jinja2 then accepts a caller,
  // extra positional or extra keyword arguments).
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

enum class StmtKind : uint8_t {
  kData,         // text
  kPrint,        // expr
  kIf,           // branches (condition, body); else_body
  kFor,          // target in expr [if condition] [recursive]: body else else_body
  kSet,          // target = expr
  kSetBlock,     // target [| filter] = body
  kMacro,        // macro
  kCallBlock,    // call expr with caller = macro
  kFilterBlock,  // filter chain over body
  kWith,         // assignments; body
  kBreak,
  kContinue,
  kScope,  // body ({% print %}; {% generation %} in a frame of its own)
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;  // kFor's filter
  ExprPtr filter;     // kSetBlock, kFilterBlock: the chain (innermost input null)
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  Target target;
  bool recursive = false;
  // kScope: the body runs in a frame of its own, as a caller does.
  bool own_frame = false;
  std::unique_ptr<MacroDef> macro;
  std::vector<std::pair<Target, ExprPtr>> assignments;
};

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_AST_H_
