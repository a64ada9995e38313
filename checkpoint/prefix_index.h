// PrefixIndex: a radix tree over symbol prefixes (tokens and whole multimodal
// chunks) mapping to checkpoints and live sequences, shared across sessions:
// a system prompt computed once serves every conversation that starts with
// it. Partitioned by tenant: a lookup only sees its own tenant's entries
// (the service keys tenants per auth token unless they may share).
//
// Symbols are atomic (a chunk is one symbol), so a match never splits a chunk.
#ifndef CAIRN_CHECKPOINT_PREFIX_INDEX_H_
#define CAIRN_CHECKPOINT_PREFIX_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "checkpoint/prompt.h"

namespace cairn::checkpoint {

enum class EntryKind : uint8_t {
  kCheckpoint,  // checkpoint-scope snapshot: needs the prefix in attention already
  kFull,        // full snapshot: restorable onto any sequence
  kLive,        // a live sequence whose history is this path
};

struct IndexEntry {
  EntryKind kind = EntryKind::kCheckpoint;
  uint64_t id = 0;          // store id, or the engine's live sequence id; unique
  Pos pos = 0;              // position at the end of the path
  bool has_logits = false;  // the logits of the path's last row come with it
  size_t bytes = 0;         // bytes a restore copies
};

struct IndexHit {
  size_t depth = 0;  // symbols in the entry's path
  IndexEntry entry;
};

struct IndexMatch {
  // Leading query symbols present in the tree (for this tenant).
  size_t matched = 0;
  // Entries whose path is a prefix of the query, ascending depth.
  std::vector<IndexHit> on_path;
  // Up to max_below kFull/kLive entries whose path shares exactly `matched`
  // symbols with the query and continues differently (or beyond the query),
  // shallowest first: bases for a restore followed by a cut.
  std::vector<IndexHit> below;
};

// Thread-safe (one internal mutex).
class PrefixIndex final {
 public:
  static absl::StatusOr<std::unique_ptr<PrefixIndex>> Create();
  ~PrefixIndex();

  // Adds `entry` at the end of `path` in `tenant`'s partition. ALREADY_EXISTS
  // when entry.id is indexed already; INVALID_ARGUMENT for an id of 0.
  absl::Status Insert(std::string_view tenant, std::span<const SymbolKey> path, const IndexEntry& entry);
  // A checkpoint whose nearest shallower checkpoint on its path changed.
  struct Reparented {
    uint64_t id = 0;
    Pos pos = 0;         // its position
    Pos parent_pos = 0;  // its new nearest shallower checkpoint's (0: none)
  };
  // Removes the entry with this id wherever it is; false when absent. With
  // `reparented`, a removed checkpoint's nearest checkpoints below it (live
  // sequences do not count) are listed with the position of their new
  // nearest checkpoint above.
  bool Remove(uint64_t id, std::vector<Reparented>* reparented = nullptr);
  // See IndexMatch.
  IndexMatch Lookup(std::string_view tenant, std::span<const SymbolKey> query, size_t max_below = 4) const;

  // Continuations below the entry's path (children of its node: other
  // conversations or later turns); -1 when the id is not indexed.
  int32_t Branches(uint64_t id) const;

  size_t entries() const;
  size_t nodes() const;  // for tests: proves removal prunes the tree

 private:
  struct Node;
  PrefixIndex();
  void PruneLocked(Node* node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Node>, std::less<>> roots_ ABSL_GUARDED_BY(mu_);
  struct Where {
    std::string tenant;
    Node* node;
  };
  std::map<uint64_t, Where> where_ ABSL_GUARDED_BY(mu_);
  size_t nodes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_PREFIX_INDEX_H_
