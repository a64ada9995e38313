#include "backends/memory/swa_memory.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "backends/memory/fingerprint.h"

namespace cairn {
namespace {

// Snapshot encoding: this header; then per local layer the K rows of
// positions [oldest, pos) followed by their V rows; then, for kFull only,
// per global layer the K rows [0, pos) followed by the V rows; each layer's
// rows of its own widths. F32, native (little-endian) byte order.
struct Header {
  uint32_t magic;
  uint32_t scope;
  uint32_t n_local;
  uint32_t n_global;
  uint64_t local_row_floats;  // K and V floats of one position over the local layers
  uint64_t global_row_floats;
  int64_t window;
  int64_t ring_rows;
  int64_t oldest;
  int64_t pos;
};
constexpr uint32_t kMagic = 0x3257'5343;  // "CSW2"

KvGeometry GlobalGeometry(const SwaGeometry& g) {
  KvGeometry kv;
  kv.layers = g.global;
  kv.capacity = g.capacity;
  kv.layout = FingerprintMix(g.layout, "global", 6);  // never compared: snapshots go through SwaMemory
  return kv;
}

}  // namespace

SwaMemory::SwaMemory(const SwaGeometry& geometry, const void* owner)
    : LayerMemory(owner),
      geometry_(geometry),
      local_row_floats_(KvRowFloats(geometry.local)),
      global_row_floats_(KvRowFloats(geometry.global)),
      global_(GlobalGeometry(geometry), owner),
      ring_k_(geometry.local.size()),
      ring_v_(geometry.local.size()) {}

Pos SwaMemory::LowestTruncate() const {
  // Positions before `oldest_` are gone; a query at p needs p - W + 1 .. p - 1.
  if (geometry_.n_local() == 0 || oldest_ == 0) return 0;
  return oldest_ + geometry_.window - 1;
}

MemoryCapabilities SwaMemory::caps() const {
  MemoryCapabilities c;
  c.truncatable = geometry_.n_local() == 0;
  c.rollback_window = std::max<Pos>(0, next_pos_ - LowestTruncate());
  c.rollback_slack =
      c.truncatable ? std::numeric_limits<Pos>::max() : std::max<Pos>(0, geometry_.ring_rows - (geometry_.window - 1));
  c.has_checkpoint_state = geometry_.n_local() > 0;
  return c;
}

absl::Status SwaMemory::Truncate(Pos p) {
  if (p < 0 || p > next_pos_) {
    return absl::InvalidArgumentError(absl::StrCat("truncate to position ", p, " outside [0, ", next_pos_, "]"));
  }
  if (p == next_pos_) return absl::OkStatus();
  if (p != 0 && p < LowestTruncate()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot truncate to position ", p, ": the sliding-window rings hold positions from ", oldest_,
                     " and a query at ", p, " needs keys from ", p - geometry_.window + 1, " (rollback window ",
                     caps().rollback_window, " of ", next_pos_, " positions); restore a checkpoint instead"));
  }
  if (absl::Status s = global_.Truncate(p); !s.ok()) return s;
  next_pos_ = p;
  if (p == 0) oldest_ = 0;
  return absl::OkStatus();
}

absl::Status SwaMemory::ReserveRings(Pos end) {
  const Pos need = std::min<Pos>(end, geometry_.ring_rows);
  if (need <= ring_alloc_) return absl::OkStatus();
  // Grow geometrically up to R rows. Until a ring is full no position wraps
  // (slot == position), so growing keeps every row in its slot.
  const Pos target = std::min<Pos>(geometry_.ring_rows, std::max<Pos>(need, std::max<Pos>(64, ring_alloc_ * 2)));
  try {
    for (int32_t l = 0; l < geometry_.n_local(); ++l) {
      ring_k_[l].resize(static_cast<size_t>(target) * geometry_.local[l].k);
      ring_v_[l].resize(static_cast<size_t>(target) * geometry_.local[l].v);
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate sliding-window rings of ", target, " rows"));
  }
  ring_alloc_ = target;
  return absl::OkStatus();
}

absl::Status SwaMemory::Reserve(Pos end) {
  if (end < 0 || end > geometry_.capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sequence needs ", end, " positions, the context holds ", geometry_.capacity));
  }
  if (absl::Status s = global_.Reserve(end); !s.ok()) return s;
  return ReserveRings(end);
}

absl::Status SwaMemory::Reserve(Pos end, int64_t end_rows) {
  (void)end_rows;
  return Reserve(end);
}

KvRows SwaMemory::kv(int32_t slot) {
  if (slot < geometry_.n_global()) return global_.kv(slot);
  const int32_t l = slot - geometry_.n_global();
  const KvWidth& w = geometry_.local[l];
  return KvRows{ring_k_[l].data(), ring_v_[l].data(), w.k, w.v, geometry_.ring_rows};
}

void SwaMemory::Commit(Pos span, int64_t rows, bool chunk) {
  (void)rows;
  (void)chunk;
  Advance(next_pos_ + span);
}

void SwaMemory::Advance(Pos end) {
  next_pos_ = end;
  oldest_ = std::max<Pos>(oldest_, end - geometry_.ring_rows);
  global_.SetNextPos(end);
}

void SwaMemory::ForEachRingSegment(Pos begin, Pos end, const std::function<void(Pos, Pos)>& fn) const {
  // At most R positions: one run of slots, or two when it crosses the end.
  while (begin < end) {
    const Pos n = std::min<Pos>(end - begin, geometry_.ring_rows - static_cast<Pos>(Slot(begin)));
    fn(begin, n);
    begin += n;
  }
}

size_t SwaMemory::Bytes(SnapshotScope scope) const {
  size_t n = sizeof(Header) + static_cast<size_t>(next_pos_ - oldest_) * local_row_floats_ * sizeof(float);
  if (scope == SnapshotScope::kFull) n += static_cast<size_t>(next_pos_) * global_row_floats_ * sizeof(float);
  return n;
}

absl::StatusOr<Snapshot> SwaMemory::Capture(SnapshotScope scope) const {
  Snapshot s;
  s.pos = next_pos_;
  s.scope = scope;
  s.layout = geometry_.layout;
  const Header h{kMagic,
                 static_cast<uint32_t>(scope),
                 static_cast<uint32_t>(geometry_.n_local()),
                 static_cast<uint32_t>(geometry_.n_global()),
                 static_cast<uint64_t>(local_row_floats_),
                 static_cast<uint64_t>(global_row_floats_),
                 geometry_.window,
                 geometry_.ring_rows,
                 oldest_,
                 next_pos_};
  // Appending into reserved capacity writes every byte once (resize would
  // zero the buffer first: a second pass over tens of MB).
  s.data.reserve(Bytes(scope));
  auto append = [&s](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    s.data.insert(s.data.end(), b, b + n);
  };
  append(&h, sizeof h);
  for (int32_t l = 0; l < geometry_.n_local(); ++l) {
    const size_t kb = geometry_.local[l].k * sizeof(float), vb = geometry_.local[l].v * sizeof(float);
    ForEachRingSegment(oldest_, next_pos_, [&](Pos p, Pos n) { append(ring_k(l, p), n * kb); });
    ForEachRingSegment(oldest_, next_pos_, [&](Pos p, Pos n) { append(ring_v(l, p), n * vb); });
  }
  if (scope == SnapshotScope::kFull) {
    for (int32_t g = 0; g < geometry_.n_global(); ++g) {
      if (next_pos_ == 0) break;
      append(global_.k(g), static_cast<size_t>(next_pos_) * geometry_.global[g].k * sizeof(float));
      append(global_.v(g), static_cast<size_t>(next_pos_) * geometry_.global[g].v * sizeof(float));
    }
  }
  return s;
}

absl::Status SwaMemory::Restore(const Snapshot& s) {
  if (s.layout != geometry_.layout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot layout ", s.layout, " belongs to another model or geometry (expected ", geometry_.layout, ")"));
  }
  Header h;
  if (s.data.size() < sizeof h) return absl::InvalidArgumentError("sliding-window snapshot is truncated (no header)");
  std::memcpy(&h, s.data.data(), sizeof h);
  if (h.magic != kMagic || h.scope != static_cast<uint32_t>(s.scope) ||
      h.n_local != static_cast<uint32_t>(geometry_.n_local()) ||
      h.n_global != static_cast<uint32_t>(geometry_.n_global()) ||
      h.local_row_floats != static_cast<uint64_t>(local_row_floats_) ||
      h.global_row_floats != static_cast<uint64_t>(global_row_floats_) || h.window != geometry_.window ||
      h.ring_rows != geometry_.ring_rows) {
    return absl::InvalidArgumentError("malformed sliding-window snapshot (header does not match this memory)");
  }
  if (h.pos != s.pos || h.pos < 0 || h.pos > geometry_.capacity || h.oldest < 0 || h.oldest > h.pos ||
      h.pos - h.oldest > geometry_.ring_rows) {
    return absl::InvalidArgumentError(absl::StrCat("malformed sliding-window snapshot (positions ", h.oldest, "..",
                                                   h.pos, " for snapshot position ", s.pos, ")"));
  }
  const Pos pos = static_cast<Pos>(h.pos), oldest = static_cast<Pos>(h.oldest);
  size_t expected = sizeof h + static_cast<size_t>(pos - oldest) * local_row_floats_ * sizeof(float);
  if (s.scope == SnapshotScope::kFull) expected += static_cast<size_t>(pos) * global_row_floats_ * sizeof(float);
  if (s.data.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed sliding-window snapshot: ", s.data.size(), " bytes, expected ", expected));
  }
  if (s.scope == SnapshotScope::kCheckpoint && geometry_.n_global() > 0 && pos > next_pos_) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint at position ", pos, " is beyond the global layers' cached prefix of ", next_pos_));
  }
  // Growing storage changes nothing absorbed: a failure here leaves the memory as it was.
  if (absl::Status st = global_.Reserve(pos); !st.ok()) return st;
  if (absl::Status st = ReserveRings(pos); !st.ok()) return st;

  const uint8_t* in = s.data.data() + sizeof h;
  for (int32_t l = 0; l < geometry_.n_local(); ++l) {
    const size_t kb = geometry_.local[l].k * sizeof(float), vb = geometry_.local[l].v * sizeof(float);
    ForEachRingSegment(oldest, pos, [&](Pos p, Pos n) {
      std::memcpy(ring_k(l, p), in, n * kb);
      in += n * kb;
    });
    ForEachRingSegment(oldest, pos, [&](Pos p, Pos n) {
      std::memcpy(ring_v(l, p), in, n * vb);
      in += n * vb;
    });
  }
  if (s.scope == SnapshotScope::kFull) {
    for (int32_t g = 0; g < geometry_.n_global(); ++g) {
      const size_t kn = static_cast<size_t>(pos) * geometry_.global[g].k * sizeof(float);
      const size_t vn = static_cast<size_t>(pos) * geometry_.global[g].v * sizeof(float);
      if (kn) std::memcpy(global_.k(g), in, kn);
      in += kn;
      if (vn) std::memcpy(global_.v(g), in, vn);
      in += vn;
    }
  }
  // A checkpoint keeps the global rows [0, pos) the memory already holds.
  global_.SetNextPos(pos);
  next_pos_ = pos;
  oldest_ = oldest;
  return absl::OkStatus();
}

}  // namespace cairn
