// Early returns on error for the interpreter's StatusOr-heavy code.
#ifndef CAIRN_CHAT_JINJA_STATUS_MACROS_H_
#define CAIRN_CHAT_JINJA_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define JINJA_RETURN_IF_ERROR(expr)                                           \
  do {                                                                        \
    if (::absl::Status jinja_st_ = (expr); !jinja_st_.ok()) return jinja_st_; \
  } while (0)

#define JINJA_CONCAT_INNER(a, b) a##b
#define JINJA_CONCAT(a, b) JINJA_CONCAT_INNER(a, b)
#define JINJA_ASSIGN_OR_RETURN(lhs, expr) JINJA_ASSIGN_OR_RETURN_IMPL(JINJA_CONCAT(jinja_so_, __LINE__), lhs, expr)
#define JINJA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)

#endif  // CAIRN_CHAT_JINJA_STATUS_MACROS_H_
