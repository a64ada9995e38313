#include "service/api/large_work_gate.h"

#include <malloc.h>

namespace cairn::service {

void LargeWorkGate::Enter() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &LargeWorkGate::HasRoom));
  ++running_;
}

void LargeWorkGate::Exit() {
  // Before the slot is given up, so at most `slots` inputs' memory is ever
  // held at once.
  ::malloc_trim(0);
  absl::MutexLock lock(&mu_);
  --running_;
}

}  // namespace cairn::service
