// gRPC's transport of a Generate call (generate_sink.h): a callback-API
// server-write reactor that carries the call's messages and status and
// reports completed writes and cancellation back to it.
#ifndef CAIRN_SERVICE_API_GENERATE_REACTOR_H_
#define CAIRN_SERVICE_API_GENERATE_REACTOR_H_

#include <chrono>
#include <memory>
#include <string_view>

#include "cairn/v1/inference.grpc.pb.h"
#include "service/api/generate_sink.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace cairn::service {

// One ordering that gRPC guarantees between a reactor's caller and its
// reactions, told to ThreadSanitizer: gRPC keeps it with atomics in its
// uninstrumented core, which TSan cannot see (scripts/tsan.supp). No-op in
// other builds. Each edge is its own member: distinct members have distinct
// addresses even when empty, and the address names the edge.
class ReactionEdge final {
 public:
  void Before() {
#if defined(__SANITIZE_THREAD__)
    __tsan_release(this);
#endif
  }
  void After() {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(this);
#endif
  }
};

// Created by InferenceService::Generate; gRPC holds it until OnDone, the
// call holds it (as its sink) until the call is freed. Thread-safe as
// gRPC's reactors are: its callbacks and the call's Write and Finish never
// overlap a write in flight.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>, public GenerateSink {
 public:
  // A reactor for `ctx`; Attach gives it its call before gRPC may call it.
  static std::shared_ptr<GenerateReactor> Create(grpc::CallbackServerContext* ctx);
  void Attach(std::shared_ptr<GenerateStream> call) {
    call_ = std::move(call);
    attached_.Before();
  }

  // GenerateSink.
  std::string_view Method() const override { return "Generate"; }
  absl::StatusOr<Caller> Authenticate(const Authenticator& auth) const override { return auth.Authenticate(*ctx_); }
  std::chrono::system_clock::time_point Deadline() const override { return ctx_->deadline(); }
  // StartWrite serializes the message before it returns; OnWriteDone may
  // already run, hence an edge both before (what built the message) and after
  // (the serialization) it.
  void Write(const v1::GenerateResponse* message) override {
    written_.Before();
    StartWrite(message);
    written_.Before();
  }
  void Finish(const absl::Status& status, const v1::GenerateResponse* final) override;
  void Abort() override { ctx_->TryCancel(); }

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override {
    attached_.After();
    written_.After();
    call_->WriteDone(ok);
    done_.Before();
  }
  void OnCancel() override {
    attached_.After();
    call_->Cancel();
    done_.Before();
  }
  void OnDone() override;

 private:
  explicit GenerateReactor(grpc::CallbackServerContext* ctx) : ctx_(ctx) {}

  grpc::CallbackServerContext* const ctx_;
  std::shared_ptr<GenerateStream> call_;   // until OnDone
  std::shared_ptr<GenerateReactor> self_;  // gRPC's reference: from Create to OnDone
  // gRPC calls no reaction before the handler that attached the call returns;
  // OnWriteDone follows its StartWrite; OnDone follows Finish and every other
  // reaction.
  ReactionEdge attached_, written_, done_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_GENERATE_REACTOR_H_
