#include "bench/offline_retention.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace cairn::bench {

using checkpoint::RetentionClock;
using checkpoint::RetentionEvent;
using checkpoint::RetentionFacts;

void ReferenceRecorder::Observe(RetentionEvent event, const RetentionFacts& e, const RetentionClock& now) {
  if (event == RetentionEvent::kUsed && e.path_key != 0) {
    std::vector<uint64_t>& uses = stream_[e.path_key];
    if (uses.empty() || uses.back() != now.request) uses.push_back(now.request);
  }
  if (std::getenv("CAIRN_DEBUG_RETENTION") && (event == RetentionEvent::kEvicted || event == RetentionEvent::kUsed)) {
    auto* f = dynamic_cast<checkpoint::ForecastRetention*>(inner_.get());
    if (f != nullptr) {
      const auto fc = f->Predict(e, now);
      std::fprintf(stderr, "%s r%llu %s%s pos %d uses %u idle %llu P %.3f stay %.1f saving %.1f cost %.1f score %.2f\n",
                   event == RetentionEvent::kEvicted ? "EVICT" : "USE  ", (unsigned long long)now.request,
                   checkpoint::CaptureReasonName(e.reason), e.stale ? "(stale)" : "", e.pos, e.uses,
                   (unsigned long long)(now.request - e.last_use.request), fc.chance, fc.stay, f->Saving(e), e.cost,
                   f->Score(e, now));
    }
  }
  if (event == RetentionEvent::kAdded) lifetimes_[e.id] = Lifetime{now.request, now.request, e.bytes, false};
  if (event == RetentionEvent::kUsed) {
    Lifetime& l = lifetimes_[e.id];
    l.last_use = now.request;
    l.used = true;
  }
  ReasonTally& t = tally_[static_cast<size_t>(e.reason)];
  switch (event) {
    case RetentionEvent::kAdded:
      ++t.added;
      t.added_bytes += static_cast<double>(e.bytes);
      break;
    case RetentionEvent::kUsed:
      ++t.uses;
      break;
    case RetentionEvent::kRemoved:
      if (e.uses == 0) ++t.removed_unused;
      break;
    case RetentionEvent::kCredited:
      t.credited += e.saved;
      break;
    case RetentionEvent::kMissed:
      ++t.missed;
      break;
    case RetentionEvent::kEvicted:
    case RetentionEvent::kRefused:
    case RetentionEvent::kForgotten:
      break;
  }
  inner_->Observe(event, e, now);
}

size_t ReferenceRecorder::NeededPeak() const {
  // Sweep over request clocks: +bytes at capture, -bytes after the last use.
  std::map<uint64_t, int64_t> delta;
  for (const auto& [id, l] : lifetimes_) {
    if (!l.used) continue;
    delta[l.added] += static_cast<int64_t>(l.bytes);
    delta[l.last_use + 1] -= static_cast<int64_t>(l.bytes);
  }
  int64_t held = 0, peak = 0;
  for (const auto& [t, d] : delta) {
    held += d;
    peak = std::max(peak, held);
  }
  return static_cast<size_t>(peak);
}

uint64_t OfflineRetention::NextReference(uint64_t path_key, uint64_t now) const {
  auto it = future_->find(path_key);
  if (it == future_->end()) return 0;
  // Restores happen before a prompt's own captures: a reference at `now`
  // itself is already past when a capture of this prompt asks.
  auto next = std::upper_bound(it->second.begin(), it->second.end(), now);
  return next == it->second.end() ? 0 : *next;
}

double OfflineRetention::Score(const RetentionFacts& e, const RetentionClock& now) const {
  const uint64_t next = NextReference(e.path_key, now.request);
  if (next == 0) return -std::numeric_limits<double>::infinity();  // never needed again
  return e.cost / (static_cast<double>(std::max<size_t>(e.bytes, 1)) * static_cast<double>(next - now.request));
}

bool OfflineRetention::Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
                             const RetentionClock& now) const {
  if (NextReference(incoming.path_key, now.request) == 0) return false;  // never needed
  return checkpoint::OutscoresVictims(*this, incoming, victims, now);
}

}  // namespace cairn::bench
