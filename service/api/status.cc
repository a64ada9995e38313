#include "service/api/status.h"

#include <string>

#include "absl/strings/cord.h"

namespace cairn::service {
namespace {

constexpr char kContextLengthExceeded[] = "cairn/context_length_exceeded";

}  // namespace

absl::Status ContextLengthExceeded(const std::string& message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kContextLengthExceeded, absl::Cord());
  return status;
}

bool IsContextLengthExceeded(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted && status.GetPayload(kContextLengthExceeded).has_value();
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case absl::StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case absl::StatusCode::kUnknown:
      code = grpc::StatusCode::UNKNOWN;
      break;
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kAborted:
      code = grpc::StatusCode::ABORTED;
      break;
    case absl::StatusCode::kOutOfRange:
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case absl::StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case absl::StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case absl::StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    default:
      code = grpc::StatusCode::UNKNOWN;
      break;
  }
  return grpc::Status(code, std::string(status.message()));
}

}  // namespace cairn::service
