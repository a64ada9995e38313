// Who makes a call, as far as sessions care: the owner of the sessions it
// creates and the partition of the prefix cache its sequences use. Decided
// per call by the API's authentication (service/api/auth.h).
#ifndef CAIRN_SERVICE_SESSIONS_CALLER_H_
#define CAIRN_SERVICE_SESSIONS_CALLER_H_

#include <string>

#include "absl/time/time.h"

namespace cairn::service {

struct Caller {
  std::string owner;         // owns sessions ("" when anonymous)
  std::string cache_tenant;  // partition of the prefix cache
  // How long the call may wait for a session still finishing a stopped
  // request (SessionManager::Acquire): its deadline. Past: no waiting.
  absl::Time wait_until = absl::InfinitePast();
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_CALLER_H_
