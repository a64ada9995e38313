#include "backends/memory/recurrent_memory.h"

#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<RecurrentMemory>> RecurrentMemory::Create(const void* owner, uint64_t layout,
                                                                         int64_t n_layers, int64_t conv_floats,
                                                                         int64_t ssm_floats) {
  // A layer may hold only conv inputs (LFM2's short convolution) or only a
  // recurrent state, but not nothing.
  if (n_layers <= 0 || conv_floats < 0 || ssm_floats < 0 || conv_floats + ssm_floats == 0) {
    return absl::InvalidArgumentError(absl::StrCat("recurrent memory needs positive sizes (layers ", n_layers,
                                                   ", conv ", conv_floats, ", ssm ", ssm_floats, ")"));
  }
  const int64_t per_layer = conv_floats + ssm_floats;
  if (per_layer > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(float)) / n_layers) {
    return absl::ResourceExhaustedError("recurrent state size overflows");
  }
  const int64_t n = per_layer * n_layers;
  // Value-initialized: a fresh sequence starts from zero conv inputs and a
  // zero SSM state, as the reference does.
  std::unique_ptr<float[]> data(new (std::nothrow) float[static_cast<size_t>(n)]());
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", n * sizeof(float), " bytes of recurrent state"));
  }
  return std::unique_ptr<RecurrentMemory>(
      new RecurrentMemory(owner, layout, n_layers, conv_floats, ssm_floats, std::move(data)));
}

RecurrentMemory::RecurrentMemory(const void* owner, uint64_t layout, int64_t n_layers, int64_t conv_floats,
                                 int64_t ssm_floats, std::unique_ptr<float[]> data)
    : LayerMemory(owner),
      layout_(layout),
      n_layers_(n_layers),
      conv_floats_(conv_floats),
      ssm_floats_(ssm_floats),
      n_floats_(n_layers * (conv_floats + ssm_floats)),
      data_(std::move(data)) {}

MemoryCapabilities RecurrentMemory::caps() const {
  MemoryCapabilities c;
  c.truncatable = false;
  c.rollback_window = 0;
  c.has_checkpoint_state = true;
  return c;
}

absl::Status RecurrentMemory::Truncate(Pos p) {
  if (p < 0 || p > pos_) {
    return absl::InvalidArgumentError(absl::StrCat("truncate to ", p, " outside [0, ", pos_, "]"));
  }
  if (p == pos_) return absl::OkStatus();
  if (p == 0) {
    std::memset(data_.get(), 0, state_bytes());
    pos_ = 0;
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("recurrent state at position ", pos_, " cannot be cut back to ", p,
                                                    ": restore a snapshot taken at or before ", p, " instead"));
}

absl::StatusOr<Snapshot> RecurrentMemory::Capture(SnapshotScope scope) const {
  Snapshot s;
  s.pos = pos_;
  s.scope = scope;
  s.layout = layout_;
  // assign() from a byte range allocates and copies in one pass (resize
  // then memcpy would zero the bytes first).
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data_.get());
  s.data.assign(bytes, bytes + state_bytes());
  return s;
}

Snapshot RecurrentMemory::AllocateSnapshot(Pos pos) const {
  Snapshot s;
  s.pos = pos;
  s.scope = SnapshotScope::kCheckpoint;
  s.layout = layout_;
  s.data.resize(state_bytes());
  return s;
}

Snapshot RecurrentMemory::AllocateCheckpointAhead(Pos pos, uint8_t** state) const {
  Snapshot s = AllocateSnapshot(pos);
  *state = s.data.data();
  return s;
}

absl::Status RecurrentMemory::Reserve(Pos end, int64_t end_rows) {
  (void)end;
  (void)end_rows;
  return absl::OkStatus();
}

void RecurrentMemory::Commit(Pos span, int64_t rows, bool chunk) {
  (void)rows;
  (void)chunk;
  Advance(span);
}

absl::Status RecurrentMemory::Restore(const Snapshot& snapshot) {
  if (snapshot.layout != layout_) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot layout ", snapshot.layout, " is not this model's recurrent layout ", layout_));
  }
  if (snapshot.data.size() != state_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed recurrent snapshot: ", snapshot.data.size(), " bytes, expected ", state_bytes()));
  }
  if (snapshot.pos < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed recurrent snapshot: position ", snapshot.pos));
  }
  if (snapshot.scope != SnapshotScope::kCheckpoint && snapshot.scope != SnapshotScope::kFull) {
    return absl::InvalidArgumentError("malformed recurrent snapshot: unknown scope");
  }
  return RestoreState(snapshot.pos, snapshot.data);
}

absl::Status RecurrentMemory::RestoreState(Pos pos, std::span<const uint8_t> bytes) {
  if (bytes.size() != state_bytes() || pos < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed recurrent state: ", bytes.size(), " bytes at position ",
                                                   pos, ", expected ", state_bytes(), " bytes"));
  }
  std::memcpy(data_.get(), bytes.data(), state_bytes());
  pos_ = pos;
  return absl::OkStatus();
}

size_t RecurrentMemory::Bytes(SnapshotScope) const { return state_bytes(); }

}  // namespace cairn
