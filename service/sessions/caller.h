// Who makes a call, as far as sessions care: the owner of the sessions it
// creates and the partition of the prefix cache its sequences use. Decided
// per call by the API's authentication (service/api/auth.h).
#ifndef CAIRN_SERVICE_SESSIONS_CALLER_H_
#define CAIRN_SERVICE_SESSIONS_CALLER_H_

#include <string>

namespace cairn::service {

struct Caller {
  std::string owner;         // owns sessions ("" when anonymous)
  std::string cache_tenant;  // partition of the prefix cache
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_CALLER_H_
