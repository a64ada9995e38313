// Counts the depth of a recursive walk (parser rules, statement and
// expression evaluation, macro calls) so that each can be bounded.
#ifndef CAIRN_CHAT_JINJA_NESTING_H_
#define CAIRN_CHAT_JINJA_NESTING_H_

namespace cairn::jinja {

// Increments `*depth` for its lifetime.
class NestingGuard {
 public:
  explicit NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~NestingGuard() { --*depth_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  int* depth_;
};

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_NESTING_H_
