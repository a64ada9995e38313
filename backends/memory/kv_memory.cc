#include "backends/memory/kv_memory.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"

namespace cairn {
namespace {

// kFull snapshot encoding: this header, then per layer the K rows [0, pos)
// followed by the V rows [0, pos), each of the layer's widths, F32
// little-endian. row_floats is the K and V floats of one position over all
// layers (the layout fingerprint tells the layers' widths apart).
struct FullHeader {
  uint32_t magic;
  uint32_t n_layers;
  uint64_t row_floats;
  int64_t pos;
};
constexpr uint32_t kFullMagic = 0x3256'4B43;  // "CKV2"

}  // namespace

KvMemory::KvMemory(const KvGeometry& geometry, const void* owner)
    : LayerMemory(owner),
      geometry_(geometry),
      row_floats_(KvRowFloats(geometry.layers)),
      k_(geometry.layers.size()),
      v_(geometry.layers.size()) {}

absl::Status KvMemory::Reserve(Pos end, int64_t end_rows) {
  (void)end;
  return Reserve(static_cast<Pos>(std::min<int64_t>(end_rows, std::numeric_limits<Pos>::max())));
}

KvRows KvMemory::kv(int32_t slot) {
  const KvWidth& w = geometry_.layers[slot];
  return KvRows{k_[slot].data(), v_[slot].data(), w.k, w.v, 0};
}

void KvMemory::Commit(Pos span, int64_t rows, bool chunk) {
  (void)span;
  (void)chunk;
  next_pos_ += static_cast<Pos>(rows);
}

MemoryCapabilities KvMemory::caps() const {
  MemoryCapabilities c;
  c.truncatable = true;
  c.rollback_window = next_pos_;
  c.rollback_slack = std::numeric_limits<Pos>::max();
  c.has_checkpoint_state = false;
  return c;
}

absl::Status KvMemory::Truncate(Pos p) {
  if (p < 0 || p > next_pos_) {
    return absl::InvalidArgumentError(absl::StrCat("truncate to position ", p, " outside [0, ", next_pos_, "]"));
  }
  next_pos_ = p;
  return absl::OkStatus();
}

absl::Status KvMemory::Reserve(Pos n) {
  if (n < 0 || n > geometry_.capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sequence needs ", n, " positions, the context holds ", geometry_.capacity));
  }
  if (n <= reserved_) return absl::OkStatus();
  // Geometric growth keeps appends amortized O(1) per position.
  const Pos target = std::min<Pos>(geometry_.capacity, std::max<Pos>(n, std::max<Pos>(64, reserved_ * 2)));
  try {
    for (int32_t l = 0; l < geometry_.n_layers(); ++l) {
      k_[l].resize(static_cast<size_t>(target) * geometry_.layers[l].k);
      v_[l].resize(static_cast<size_t>(target) * geometry_.layers[l].v);
    }
  } catch (const std::bad_alloc&) {
    // Layers that grew keep their (unchanged) content; only capacity differs.
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a KV cache of ", target, " positions"));
  }
  reserved_ = target;
  return absl::OkStatus();
}

size_t KvMemory::Bytes(SnapshotScope scope) const {
  if (scope == SnapshotScope::kCheckpoint) return 0;
  return sizeof(FullHeader) + static_cast<size_t>(next_pos_) * row_floats_ * sizeof(float);
}

absl::StatusOr<Snapshot> KvMemory::Capture(SnapshotScope scope) const {
  Snapshot s;
  s.pos = next_pos_;
  s.scope = scope;
  s.layout = geometry_.layout;
  if (scope == SnapshotScope::kCheckpoint) return s;
  s.data.resize(Bytes(scope));
  FullHeader h{kFullMagic, static_cast<uint32_t>(geometry_.n_layers()), static_cast<uint64_t>(row_floats_), next_pos_};
  uint8_t* out = s.data.data();
  std::memcpy(out, &h, sizeof h);
  out += sizeof h;
  for (int32_t l = 0; l < geometry_.n_layers(); ++l) {
    const size_t kb = static_cast<size_t>(next_pos_) * geometry_.layers[l].k * sizeof(float);
    const size_t vb = static_cast<size_t>(next_pos_) * geometry_.layers[l].v * sizeof(float);
    if (kb) std::memcpy(out, k_[l].data(), kb);
    out += kb;
    if (vb) std::memcpy(out, v_[l].data(), vb);
    out += vb;
  }
  return s;
}

absl::Status KvMemory::Restore(const Snapshot& s) {
  if (s.layout != geometry_.layout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot layout ", s.layout, " belongs to another model or geometry (expected ", geometry_.layout, ")"));
  }
  if (s.pos < 0) return absl::InvalidArgumentError(absl::StrCat("snapshot position ", s.pos, " is negative"));
  if (s.scope == SnapshotScope::kCheckpoint) {
    if (!s.data.empty()) {
      return absl::InvalidArgumentError("a KV checkpoint snapshot carries no data; this one has some");
    }
    if (s.pos > next_pos_) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint at position ", s.pos, " is beyond the cached prefix of ", next_pos_));
    }
    next_pos_ = s.pos;
    return absl::OkStatus();
  }
  FullHeader h;
  if (s.data.size() < sizeof h) return absl::InvalidArgumentError("full KV snapshot is truncated (no header)");
  std::memcpy(&h, s.data.data(), sizeof h);
  const size_t expected = sizeof h + static_cast<size_t>(s.pos) * row_floats_ * sizeof(float);
  if (h.magic != kFullMagic || h.n_layers != static_cast<uint32_t>(geometry_.n_layers()) ||
      h.row_floats != static_cast<uint64_t>(row_floats_) || h.pos != s.pos || s.data.size() != expected) {
    return absl::InvalidArgumentError("malformed full KV snapshot (header or size does not match)");
  }
  if (absl::Status st = Reserve(s.pos); !st.ok()) return st;
  const uint8_t* in = s.data.data() + sizeof h;
  for (int32_t l = 0; l < geometry_.n_layers(); ++l) {
    const size_t kb = static_cast<size_t>(s.pos) * geometry_.layers[l].k * sizeof(float);
    const size_t vb = static_cast<size_t>(s.pos) * geometry_.layers[l].v * sizeof(float);
    if (kb) std::memcpy(k_[l].data(), in, kb);
    in += kb;
    if (vb) std::memcpy(v_[l].data(), in, vb);
    in += vb;
  }
  next_pos_ = s.pos;
  return absl::OkStatus();
}

}  // namespace cairn
