// One Generate call, from its request to its status, whatever carries it:
// the call talks to its transport through a GenerateSink (generate_sink.h):
// gRPC's callback-API reactor (generate_reactor.h) or the HTTP door's
// response writer (service/http/). The path of a request, in order (threads
// in brackets):
//
//  1. [transport] InferenceService::Generate (gRPC) or StartGenerate
//     (inference_service.cc) creates the call and hands Start to the
//     service's WorkerPool (worker_pool.h): the transport's threads never
//     wait.
//  2. [worker] Start: the caller authenticated, the model and parameters
//     checked, the prompt built (prompt_builder.h: text tokenized, messages
//     rendered), the session checked out (sessions/sessions.h, or read from
//     the session directory) or the live-memory budget reserved for a fresh
//     sequence, then the job submitted to the model's scheduler.
//  3. [scheduler] scheduling/scheduler.cc makes every engine call of the
//     request: the fresh sequence, the prompt's reuse and prefill, decode
//     steps batched with the other requests, sampling, stops, the deadline,
//     backpressure, and at the end the checkpoint after the reply and the
//     park of a fresh sequence. Each event it queues on the job wakes the
//     call (GenerateJob::on_progress -> Wake), which hands Pump to a worker
//     unless a write is in flight (its completion pumps).
//  4. [worker, or the transport after a write] Pump: the next event becomes
//     its message (generate_response.h) and is written (GenerateSink::Write),
//     one write in flight. WriteDone acknowledges each token written (the
//     scheduler pauses a request whose writes fall behind); Cancel stops
//     the job.
//  5. [worker] Conclude, once the job is done and its messages written: the
//     session's history (the prompt and the tokens written), the session
//     directory, the memory budget settled and the session released, the
//     access log and metrics, then the final message and the status
//     (GenerateSink::Finish).
//  6. [transport] done: its reference goes; the call is freed when the
//     last wake-up in flight returns.
//
// Every engine call of a generation is the scheduler's; this file only
// reads the finished job.
#ifndef CAIRN_SERVICE_API_GENERATE_CALL_H_
#define CAIRN_SERVICE_API_GENERATE_CALL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "service/api/access_log.h"
#include "service/api/generate_sink.h"
#include "service/api/inference_service.h"
#include "service/api/reply_parser.h"
#include "service/scheduling/generate_job.h"

namespace cairn::service {

class InferenceService::GenerateCall final : public GenerateStream, public std::enable_shared_from_this<GenerateCall> {
 public:
  // A new call (step 1); the transport holds the result until it is done.
  // `req` stays valid until sink->Finish.
  static std::shared_ptr<GenerateCall> Create(InferenceService& service, std::shared_ptr<GenerateSink> sink,
                                              const v1::GenerateRequest& req);
  // Hands Start to a worker: from now on the sink may be called.
  void Launch();

  void WriteDone(bool ok) override;
  void Cancel() override;

 private:
  GenerateCall(InferenceService& service, std::shared_ptr<GenerateSink> sink, const v1::GenerateRequest& req);

  // Step 2 and what it runs, in order; an error ends the call at once.
  void Start();
  absl::Status Admit();
  absl::Status Prepare();
  absl::Status CheckStopParams() const;
  absl::Status CheckOut();
  absl::Status ReserveSequence(Pos positions);
  absl::Status Submit();
  // Step 4.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);
  enum class Next { kNothing, kWrite, kConclude };
  Next TakeNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job stops for `reason` (the client cancelled or went away).
  void StopForClient(StopReason reason) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream message of `event` (parsed output added); tool calls it
  // completes are queued after it.
  v1::GenerateResponse ToMessage(const GenerateEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Step 5.
  void Conclude() ABSL_LOCKS_EXCLUDED(mu_);
  // Releases what the call holds (the session settled first), records the
  // call and sends `final` (may be null) with the status.
  void End(const absl::Status& status, const v1::GenerateResponse* final) ABSL_LOCKS_EXCLUDED(mu_);

  InferenceService& service_;
  const std::shared_ptr<GenerateSink> sink_;
  const v1::GenerateRequest& req_;
  const Clock::time_point received_ = Clock::now();

  // Start's, read-only once the job is submitted.
  GenerateTrace trace_;
  bool counted_ = false;  // holds one of the max_concurrent_generate places
  Caller caller_;
  ServedModel* model_ = nullptr;
  SamplingConfig sampling_;
  int32_t max_tokens_ = 0;
  SessionLease lease_;             // a session, exclusively this call's
  bool settle_memory_ = false;     // its reservation grew: set it to what it holds at the end
  MemoryReservation temp_memory_;  // the fresh sequence's, released after the scheduler freed it
  History prompt_;                 // moved into the job by Submit

  mutable absl::Mutex mu_;
  std::shared_ptr<GenerateJob> job_ ABSL_GUARDED_BY(mu_);
  // lease_'s session from Submit until End releases it: a stop marks it
  // (SessionManager::MarkStopping), so that the client's next request on it
  // waits for this one's end instead of being refused.
  const Session* stoppable_session_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // Cancel came
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_token_ ABSL_GUARDED_BY(mu_) = false;
  bool pump_pending_ ABSL_GUARDED_BY(mu_) = false;  // a worker will Pump
  bool concluding_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool held_back_ ABSL_GUARDED_BY(mu_) = false;     // tokens not sent because the request was stopped
  size_t written_tokens_ ABSL_GUARDED_BY(mu_) = 0;  // token deltas the transport took
  std::optional<v1::GenerateResponse> finished_ ABSL_GUARDED_BY(mu_);  // sent by Conclude
  // Parsed output (null: not parsed), and the tool-call messages it made
  // that wait for their write.
  std::unique_ptr<ReplyParser> parser_ ABSL_GUARDED_BY(mu_);
  std::vector<TokenId> continue_tokens_;  // Start's: end-of-generation tokens that do not end the turn
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  // The message being written: set under mu_ by TakeNext, then untouched
  // until its WriteDone.
  v1::GenerateResponse message_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_GENERATE_CALL_H_
