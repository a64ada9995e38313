// A backend whose Forward calls enter in arrival order (a ticket
// turnstile). A served model's scheduler runs Forward on its thread while
// other threads may too (a session export brings a sequence up to date),
// and std::mutex is not fair: without this a busy decode loop could starve
// them, or the reverse.
#ifndef CAIRN_SERVICE_SCHEDULING_FAIR_BACKEND_H_
#define CAIRN_SERVICE_SCHEDULING_FAIR_BACKEND_H_

#include <memory>

#include "backends/backend.h"

namespace cairn::service {

// Wraps `inner` (owned); everything but Forward passes through.
// Thread-safe as `inner` is.
std::unique_ptr<Backend> MakeFairBackend(std::unique_ptr<Backend> inner);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_FAIR_BACKEND_H_
