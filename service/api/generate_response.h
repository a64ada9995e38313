// The one place the scheduler's reports of a Generate request
// (service/scheduling/generate_events.h) become the API's stream messages
// (cairn.v1.GenerateResponse). The scheduler decides; this file only spells
// the decisions out in protos.
#ifndef CAIRN_SERVICE_API_GENERATE_RESPONSE_H_
#define CAIRN_SERVICE_API_GENERATE_RESPONSE_H_

#include "cairn/v1/inference.pb.h"
#include "service/scheduling/generate_events.h"

namespace cairn::service {

// The stream message for `event`.
v1::GenerateResponse ToResponse(const GenerateEvent& event);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_GENERATE_RESPONSE_H_
