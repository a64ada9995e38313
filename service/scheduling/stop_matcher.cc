#include "service/scheduling/stop_matcher.h"

#include <algorithm>

namespace cairn::service {

StopMatcher::Result StopMatcher::Push(std::string_view piece) {
  Result r;
  pending_.append(piece);
  if (stops_.empty()) {
    r.emit.swap(pending_);
    return r;
  }
  // The earliest complete match wins (ties: the longer stop string).
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > best_stop->size())) {
      best = at;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    r.emit = pending_.substr(0, best);
    r.stopped = true;
    r.matched = *best_stop;
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of a
  // stop string. Stop strings are valid UTF-8 and start with a lead byte, so
  // the split point falls on a character boundary of valid text.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  r.emit = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace cairn::service
