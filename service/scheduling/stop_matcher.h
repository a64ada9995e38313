// Stop strings matched across token boundaries.
//
// Text arrives in pieces (one per token, from the streaming detokenizer).
// Text that could still turn out to be the start of a stop string is held
// back, so a client never sees part of a stop string it would then have to
// retract.
#ifndef CAIRN_SERVICE_SCHEDULING_STOP_MATCHER_H_
#define CAIRN_SERVICE_SCHEDULING_STOP_MATCHER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::service {

// Not thread-safe: one per request.
class StopMatcher final {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Result {
    std::string emit;      // text safe to stream now
    bool stopped = false;  // a stop string matched; emit ends before it
    std::string matched;   // the stop string
  };

  // Adds a piece of output text.
  Result Push(std::string_view piece);

  // The held-back text (at the end of generation, when no stop matched).
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_STOP_MATCHER_H_
