// SharedPrefixWaits: requests held back while another request computes the
// prefix they share, so that the prefix is computed once.
//
// Users who arrive together with the same system prompt (plain tokens, no
// message boundary) would each compute it: nothing is cached when their
// prompts start. Instead, a request whose prompt shares at least
// `min_positions` positions with a prompt being processed (a leader), beyond
// what that leader has absorbed, is held here; the leader is asked for a
// full checkpoint exactly where the two prompts part
// (PrefillJob::AddSharedPoint). Once the leader has absorbed that far (or
// is gone: finished, stopped, failed), the request is handed back and starts
// from the checkpoint by the engine's normal prefix reuse. A held request
// never waits for more than the leader's computation of the shared part,
// which it would otherwise have had to compute itself.
//
// Thread safety: none; the scheduler's loop thread owns it. Leaders are
// named by their PrefillJob, valid while listed in the span given to each
// call: every call must see the current leaders (a job missing from the
// span counts as gone).
#ifndef CAIRN_SERVICE_SCHEDULING_SHARED_PREFIX_H_
#define CAIRN_SERVICE_SCHEDULING_SHARED_PREFIX_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/memory.h"
#include "checkpoint/prefill_job.h"
#include "checkpoint/prompt.h"
#include "service/scheduling/generate_job.h"

namespace cairn::service {

// A prompt being processed that others may wait for.
struct PrefixLeader {
  checkpoint::PrefillJob* job = nullptr;
  std::string_view tenant;  // its sequence's: only the same tenant shares
};

class SharedPrefixWaits final {
 public:
  // `min_positions` <= 0 disables holding.
  explicit SharedPrefixWaits(Pos min_positions) : min_positions_(min_positions) {}

  // Holds `job` (whose prompt is `prompt`, on a sequence of `tenant`, that
  // can reuse its first `reusable` symbols from the cache or its own
  // sequence) when a leader has still to compute a shared prefix of at
  // least min_positions positions beyond `reusable`, and that
  // leader agreed to capture there; the longest such prefix wins. True when
  // held (the job is then owned here until handed back).
  bool MaybeHold(const std::shared_ptr<GenerateJob>& job, const checkpoint::Prompt& prompt, std::string_view tenant,
                 size_t reusable, std::span<const PrefixLeader> leaders);
  // Hands back, in the order they were held, the jobs whose leader has
  // absorbed the shared prefix or is gone, and the jobs asked to stop.
  std::vector<std::shared_ptr<GenerateJob>> TakeReady(std::span<const PrefixLeader> leaders);
  // Hands back every held job (shutting down).
  std::vector<std::shared_ptr<GenerateJob>> TakeAll();

  size_t size() const { return held_.size(); }
  bool empty() const { return held_.empty(); }

 private:
  struct Held {
    std::shared_ptr<GenerateJob> job;
    const checkpoint::PrefillJob* leader;
    size_t shared;  // symbols the leader must absorb
  };
  const Pos min_positions_;
  std::vector<Held> held_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_SHARED_PREFIX_H_
