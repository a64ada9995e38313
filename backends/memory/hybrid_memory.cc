#include "backends/memory/hybrid_memory.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cairn {
namespace {

// Snapshot encoding: this header, n_chunks ChunkRecords, the recurrent
// part's snapshot bytes, then (kFull only) the attention part's kFull bytes.
// The parts' own encodings are embedded unchanged, so each part validates
// its bytes itself on Restore.
struct Header {
  uint32_t magic;
  uint32_t scope;
  int64_t pos;
  int64_t n_rows;
  uint64_t n_chunks;
  uint64_t recurrent_bytes;
  uint64_t attention_bytes;
};
struct ChunkRecord {
  int64_t pos, span, row, n_rows;
};
constexpr uint32_t kMagic = 0x3159'4843;  // "CHY1"

}  // namespace

absl::StatusOr<std::unique_ptr<HybridMemory>> HybridMemory::Create(const HybridGeometry& g, const void* owner) {
  if (g.recurrent_layers <= 0) {
    return absl::InvalidArgumentError("a hybrid memory needs at least one recurrent layer");
  }
  absl::StatusOr<std::unique_ptr<RecurrentMemory>> rec =
      RecurrentMemory::Create(owner, g.layout, g.recurrent_layers, g.conv_floats, g.state_floats);
  if (!rec.ok()) return rec.status();
  return std::unique_ptr<HybridMemory>(new HybridMemory(g, owner, std::move(*rec)));
}

HybridMemory::HybridMemory(const HybridGeometry& g, const void* owner, std::unique_ptr<RecurrentMemory> rec)
    : LayerMemory(owner), geometry_(g), kv_(g.attention, owner), rec_(std::move(rec)) {}

absl::Status HybridMemory::Reserve(Pos end, int64_t end_rows) {
  (void)end;
  return kv_.Reserve(end, end_rows);
}

MemoryCapabilities HybridMemory::caps() const {
  // The recurrent part decides: nothing can be cut back without a snapshot.
  MemoryCapabilities c;
  c.truncatable = false;
  c.rollback_window = 0;
  c.has_checkpoint_state = true;
  return c;
}

absl::StatusOr<int64_t> HybridMemory::RowsAt(Pos p) const {
  int64_t extra = 0;  // rows beyond one per position, from chunks before p
  for (const ChunkExtent& c : chunks_) {
    if (c.pos + c.span <= p) {
      extra += c.n_rows - c.span;
    } else if (c.pos < p) {
      return absl::FailedPreconditionError(
          absl::StrCat("position ", p, " is inside the embedding chunk at positions [", c.pos, ", ", c.pos + c.span,
                       "): a chunk is absorbed, cut back and checkpointed only as a whole"));
    } else {
      break;
    }
  }
  return static_cast<int64_t>(p) + extra;
}

void HybridMemory::Commit(Pos span, int64_t n_rows, bool chunk) {
  if (chunk) chunks_.push_back(ChunkExtent{next_pos_, span, kv_.next_pos(), n_rows});
  kv_.SetNextPos(static_cast<Pos>(kv_.next_pos() + n_rows));
  rec_->Advance(span);
  next_pos_ += span;
}

absl::Status HybridMemory::Truncate(Pos p) {
  if (p < 0 || p > next_pos_) {
    return absl::InvalidArgumentError(absl::StrCat("truncate to position ", p, " outside [0, ", next_pos_, "]"));
  }
  if (p == next_pos_) return absl::OkStatus();
  if (p == 0) {
    // Both parts accept 0 unconditionally.
    (void)kv_.Truncate(0);
    (void)rec_->Truncate(0);
    chunks_.clear();
    next_pos_ = 0;
    return absl::OkStatus();
  }
  if (absl::StatusOr<int64_t> rows = RowsAt(p); !rows.ok()) return rows.status();
  return absl::FailedPreconditionError(
      absl::StrCat("hybrid memory at position ", next_pos_, " cannot be cut back to ", p,
                   ": its recurrent layers hold state that only a snapshot taken at or before ", p, " can recover"));
}

size_t HybridMemory::HeaderBytes(size_t n_chunks) const { return sizeof(Header) + n_chunks * sizeof(ChunkRecord); }

size_t HybridMemory::Bytes(SnapshotScope scope) const {
  size_t n = HeaderBytes(chunks_.size()) + rec_->Bytes(scope);
  if (scope == SnapshotScope::kFull) n += kv_.Bytes(SnapshotScope::kFull);
  return n;
}

absl::StatusOr<Snapshot> HybridMemory::Capture(SnapshotScope scope) const {
  // Forward absorbs chunks whole, so next_pos_ is always at a chunk boundary;
  // the check keeps the contract explicit should that ever change.
  absl::StatusOr<int64_t> rows = RowsAt(next_pos_);
  if (!rows.ok()) return rows.status();
  Snapshot kv_full;
  if (scope == SnapshotScope::kFull) {
    absl::StatusOr<Snapshot> kv = kv_.Capture(SnapshotScope::kFull);
    if (!kv.ok()) return kv.status();
    kv_full = std::move(*kv);
  }
  // The recurrent state goes in straight from the recurrent memory: one copy
  // of the (large) state, no zero-filling of the buffer first.
  const std::span<const uint8_t> rec = rec_->state_bytes_view();
  Snapshot s;
  s.pos = next_pos_;
  s.scope = scope;
  s.layout = geometry_.layout;
  Header h{kMagic, static_cast<uint32_t>(scope), next_pos_, *rows, chunks_.size(), rec.size(), kv_full.data.size()};
  s.data.reserve(HeaderBytes(chunks_.size()) + rec.size() + kv_full.data.size());
  auto append = [&s](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    s.data.insert(s.data.end(), b, b + n);
  };
  append(&h, sizeof h);
  for (const ChunkExtent& c : chunks_) {
    ChunkRecord r{c.pos, c.span, c.row, c.n_rows};
    append(&r, sizeof r);
  }
  append(rec.data(), rec.size());
  append(kv_full.data.data(), kv_full.data.size());
  return s;
}

Snapshot HybridMemory::AllocateCheckpointAhead(Pos pos, uint8_t** recurrent_state) const {
  // Same encoding as Capture(kCheckpoint): the chunks so far (the run adds
  // none), the rows at `pos`, then the recurrent state.
  const int64_t rows = stored_rows() + (pos - next_pos_);
  const size_t rec_bytes = rec_->Bytes(SnapshotScope::kCheckpoint);
  Snapshot s;
  s.pos = pos;
  s.scope = SnapshotScope::kCheckpoint;
  s.layout = geometry_.layout;
  s.data.resize(HeaderBytes(chunks_.size()) + rec_bytes);
  Header h{kMagic, static_cast<uint32_t>(SnapshotScope::kCheckpoint), pos, rows, chunks_.size(), rec_bytes, 0};
  uint8_t* out = s.data.data();
  std::memcpy(out, &h, sizeof h);
  out += sizeof h;
  for (const ChunkExtent& c : chunks_) {
    ChunkRecord r{c.pos, c.span, c.row, c.n_rows};
    std::memcpy(out, &r, sizeof r);
    out += sizeof r;
  }
  *recurrent_state = out;
  return s;
}

absl::Status HybridMemory::Restore(const Snapshot& s) {
  if (s.layout != geometry_.layout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot layout ", s.layout, " belongs to another model or geometry (expected ", geometry_.layout, ")"));
  }
  Header h;
  if (s.data.size() < sizeof h) return absl::InvalidArgumentError("malformed hybrid snapshot: no header");
  std::memcpy(&h, s.data.data(), sizeof h);
  const bool full = s.scope == SnapshotScope::kFull;
  if (h.magic != kMagic || h.scope != static_cast<uint32_t>(s.scope) || h.pos != s.pos || s.pos < 0 ||
      h.n_rows < s.pos || h.n_chunks > static_cast<uint64_t>(s.pos) || h.recurrent_bytes != rec_->Bytes(s.scope) ||
      (!full && h.attention_bytes != 0)) {
    return absl::InvalidArgumentError("malformed hybrid snapshot (header does not match this memory)");
  }
  const size_t expected = HeaderBytes(h.n_chunks) + h.recurrent_bytes + h.attention_bytes;
  if (s.data.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hybrid snapshot: ", s.data.size(), " bytes, expected ", expected));
  }
  // The chunk list must be ordered, inside [0, pos) and consistent with the
  // row count, or positions and rows would disagree after the restore.
  std::vector<ChunkExtent> chunks(h.n_chunks);
  const uint8_t* in = s.data.data() + sizeof h;
  int64_t extra = 0, prev_end = 0;
  for (ChunkExtent& c : chunks) {
    ChunkRecord r;
    std::memcpy(&r, in, sizeof r);
    in += sizeof r;
    if (r.pos < prev_end || r.span <= 0 || r.n_rows < r.span || r.pos + r.span > s.pos || r.row != r.pos + extra) {
      return absl::InvalidArgumentError("malformed hybrid snapshot: inconsistent chunk list");
    }
    c = ChunkExtent{static_cast<Pos>(r.pos), static_cast<Pos>(r.span), r.row, r.n_rows};
    extra += r.n_rows - r.span;
    prev_end = r.pos + r.span;
  }
  if (h.n_rows != s.pos + extra) {
    return absl::InvalidArgumentError("malformed hybrid snapshot: row count does not match its chunks");
  }
  const std::span<const uint8_t> rec(in, h.recurrent_bytes);
  in += h.recurrent_bytes;
  Snapshot kv;
  kv.pos = static_cast<Pos>(h.n_rows);
  kv.scope = s.scope;
  kv.layout = geometry_.attention.layout;
  if (full) kv.data.assign(in, in + h.attention_bytes);

  if (!full) {
    // The attention rows of [0, pos) must already be here, in the same
    // chunk layout, for cutting them back to be exact.
    if (s.pos > next_pos_) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint at position ", s.pos, " is beyond the cached prefix of ", next_pos_));
    }
    absl::StatusOr<int64_t> rows = RowsAt(s.pos);
    if (!rows.ok()) return rows.status();
    size_t prefix = 0;
    while (prefix < chunks_.size() && chunks_[prefix].pos + chunks_[prefix].span <= s.pos) ++prefix;
    bool same = prefix == chunks.size() && *rows == h.n_rows;
    for (size_t i = 0; same && i < prefix; ++i) {
      same =
          chunks_[i].pos == chunks[i].pos && chunks_[i].span == chunks[i].span && chunks_[i].n_rows == chunks[i].n_rows;
    }
    if (!same) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint at position ", s.pos,
                       " was taken over a different layout of embedding chunks than this sequence holds"));
    }
  }
  // Every check is done; the attention part can still fail (allocation for a
  // kFull restore) before anything changed, the recurrent part cannot now.
  if (absl::Status st = kv_.Restore(kv); !st.ok()) return st;
  if (absl::Status st = rec_->RestoreState(s.pos, rec); !st.ok()) return st;
  chunks_ = std::move(chunks);
  next_pos_ = s.pos;
  return absl::OkStatus();
}

}  // namespace cairn
