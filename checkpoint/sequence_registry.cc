#include "checkpoint/sequence_registry.h"

#include <utility>

namespace cairn::checkpoint {

std::shared_ptr<SequenceState> SequenceRegistry::Add(const std::string& tenant,
                                                     std::unique_ptr<SequenceMemory> memory) {
  absl::MutexLock lock(&mu_);
  auto state = std::make_shared<SequenceState>(kIdBase + next_++, tenant, std::move(memory));
  live_[state->live_id] = state;
  return state;
}

void SequenceRegistry::Remove(uint64_t live_id) {
  {
    absl::MutexLock lock(&mu_);
    live_.erase(live_id);
  }
  index_.Remove(live_id);
}

std::shared_ptr<SequenceState> SequenceRegistry::Find(uint64_t live_id) const {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(live_id);
  return it != live_.end() ? it->second.lock() : nullptr;
}

size_t SequenceRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

void SequenceRegistry::Publish(SequenceState& s) {
  if (!publish_) return;
  index_.Remove(s.live_id);
  if (s.history.empty()) return;
  IndexEntry e;
  e.kind = EntryKind::kLive;
  e.id = s.live_id;
  e.pos = s.memory->next_pos();
  e.bytes = s.memory->Bytes(SnapshotScope::kFull);
  index_.Insert(s.tenant, s.history.keys(), e).IgnoreError();
}

}  // namespace cairn::checkpoint
