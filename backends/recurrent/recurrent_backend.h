// The recurrent family: pure state-space models. The memory of a sequence is
// a fixed-size state per layer (RecurrentMemory) that has absorbed every
// token, so it is never cut back, only restored from snapshots, which the
// backend can take inside a run (ModelInfo::snapshots_within_run).
// Architectures (wiring in mamba.cc and mamba2.cc): mamba2, mamba.
#ifndef CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_
#define CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_

#include "backends/backend.h"

namespace cairn {

// Name "recurrent". Its factory's errors: INVALID_ARGUMENT for another
// architecture, a negative max_context, or missing/inconsistent metadata
// and tensor shapes (naming the key or tensor). A run's position limit is
// options.max_context when set (RESOURCE_EXHAUSTED beyond it); the state
// itself has no capacity.
BackendFamily RecurrentFamily();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_
