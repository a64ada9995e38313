// The one place where cairn's absl::Status becomes a grpc::Status.
//
// Every component returns absl::Status with the most specific code; the
// service converts at the RPC boundary only, so codes mean the same thing in
// every RPC and the mapping is tested once.
#ifndef CAIRN_SERVICE_API_STATUS_H_
#define CAIRN_SERVICE_API_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace cairn::service {

// Same code, same message. absl and gRPC share the canonical code numbering
// (both follow google.rpc.Code), so the mapping is value-preserving; an
// unknown value becomes UNKNOWN.
grpc::Status ToGrpcStatus(const absl::Status& status);

// A prompt longer than the model's context: RESOURCE_EXHAUSTED for gRPC
// clients, marked so that the HTTP door can answer it as OpenAI does (400
// context_length_exceeded, not a 429 a client would retry).
absl::Status ContextLengthExceeded(const std::string& message);
bool IsContextLengthExceeded(const absl::Status& status);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_STATUS_H_
