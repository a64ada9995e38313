#include "service/api/generate_reactor.h"

#include <utility>

#include "service/api/status.h"

namespace cairn::service {

std::shared_ptr<GenerateReactor> GenerateReactor::Create(grpc::CallbackServerContext* ctx) {
  std::shared_ptr<GenerateReactor> reactor(new GenerateReactor(ctx));
  reactor->self_ = reactor;
  return reactor;
}

void GenerateReactor::Finish(const absl::Status& status, const v1::GenerateResponse* final) {
  written_.Before();
  done_.Before();
  if (final != nullptr) {
    StartWriteAndFinish(final, grpc::WriteOptions(), grpc::Status::OK);
  } else {
    grpc::ServerWriteReactor<v1::GenerateResponse>::Finish(ToGrpcStatus(status));
  }
  done_.Before();  // the serialization of `final` (see Write)
}

// The call may outlive this (a wake-up in flight) and holds the reactor as
// its sink until then; it writes nothing more once finished.
void GenerateReactor::OnDone() {
  attached_.After();
  done_.After();
  std::shared_ptr<GenerateReactor> last = std::move(self_);
  call_.reset();
}

}  // namespace cairn::service
