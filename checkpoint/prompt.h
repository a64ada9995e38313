// A prompt as the checkpoint component sees it: a sequence of symbols, one per
// text token and one per whole multimodal chunk, with the position each one
// ends at and the message boundaries the client marked.
//
// Matching works on symbols, so a prefix match can never split a chunk and
// every symbol boundary is a valid place to truncate or capture.
#ifndef CAIRN_CHECKPOINT_PROMPT_H_
#define CAIRN_CHECKPOINT_PROMPT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "backends/memory.h"

namespace cairn::checkpoint {

// A token's key is its id (non-negative, < 2^31); a chunk's key is a 63-bit
// hash of its geometry and rows with the top bit set, so the two never
// collide. Two different chunks colliding in 63 bits is accepted as
// negligible.
using SymbolKey = uint64_t;
inline constexpr SymbolKey kChunkKeyBit = uint64_t{1} << 63;

inline bool IsChunkKey(SymbolKey key) { return (key & kChunkKeyBit) != 0; }

// Number of leading symbols two key sequences share.
inline size_t CommonPrefix(std::span<const SymbolKey> a, std::span<const SymbolKey> b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Stable key of a chunk: hashes nx, ny and the n_rows * n_embd floats.
SymbolKey ChunkKey(const EmbeddingChunk& chunk, int32_t n_embd);

// A stable 64-bit key of a tenant's symbol path: how a retention policy (and
// a benchmark following checkpoints across runs) tells prefixes apart without
// keeping their symbols.
uint64_t PathKey(std::string_view tenant, std::span<const SymbolKey> path);
// PathKey(tenant, path.first(k)) for k = to, to - 1, ..., from + 1 (deepest
// first), in one pass over the path.
std::vector<uint64_t> PrefixPathKeys(std::string_view tenant, std::span<const SymbolKey> path, size_t from, size_t to);

// Positions a chunk advances the sequence by (backend.h: max(nx, ny)).
inline Pos ChunkSpan(const EmbeddingChunk& chunk) { return std::max(chunk.nx, chunk.ny); }

// Symbols plus the position after each one. Value type; not thread-safe.
class SymbolPath {
 public:
  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  std::span<const SymbolKey> keys() const { return keys_; }
  // Position after the first n symbols (0 for n == 0).
  Pos pos_after(size_t n) const { return n == 0 ? 0 : ends_[n - 1]; }
  Pos positions() const { return pos_after(keys_.size()); }
  // Largest n with pos_after(n) <= p.
  size_t SymbolsAtOrBefore(Pos p) const {
    return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), p) - ends_.begin());
  }

  void Push(SymbolKey key, Pos span) {
    const Pos end = positions() + span;
    keys_.push_back(key);
    ends_.push_back(end);
  }
  void Resize(size_t n) {
    keys_.resize(std::min(n, keys_.size()));
    ends_.resize(keys_.size());
  }
  // The first n symbols of `other` (n <= other.size()).
  void AssignPrefix(const SymbolPath& other, size_t n) {
    keys_.assign(other.keys_.begin(), other.keys_.begin() + n);
    ends_.assign(other.ends_.begin(), other.ends_.begin() + n);
  }

 private:
  std::vector<SymbolKey> keys_;
  std::vector<Pos> ends_;
};

// A prompt: text tokens and embedding chunks in order, plus message
// boundaries. Chunk rows are borrowed: they must outlive the Prefill call
// that uses this prompt. Not thread-safe.
class Prompt {
 public:
  void AddToken(TokenId token) {
    path_.Push(static_cast<SymbolKey>(static_cast<uint32_t>(token)), 1);
    tokens_.push_back(token);
    chunk_of_.push_back(-1);
  }
  void AddTokens(std::span<const TokenId> tokens) {
    for (TokenId t : tokens) AddToken(t);
  }
  // INVALID_ARGUMENT for an empty or malformed chunk (rows null, nx/ny <= 0,
  // n_embd <= 0).
  absl::Status AddChunk(const EmbeddingChunk& chunk, int32_t n_embd);
  // Marks a message boundary after the last symbol added. Ignored on an
  // empty prompt and when already marked there.
  void EndMessage() {
    if (!path_.empty() && (message_ends_.empty() || message_ends_.back() != path_.size())) {
      message_ends_.push_back(path_.size());
    }
  }

  const SymbolPath& path() const { return path_; }
  size_t size() const { return path_.size(); }
  bool empty() const { return path_.empty(); }
  std::span<const SymbolKey> keys() const { return path_.keys(); }
  Pos pos_after(size_t n) const { return path_.pos_after(n); }
  Pos positions() const { return path_.positions(); }

  bool is_chunk(size_t i) const { return chunk_of_[i] >= 0; }
  // Token of symbol i (undefined for chunks).
  TokenId token(size_t i) const { return tokens_[i]; }
  const EmbeddingChunk& chunk(size_t i) const { return chunks_[chunk_of_[i]]; }
  // Symbol counts after which a message ends, ascending.
  const std::vector<size_t>& message_ends() const { return message_ends_; }
  bool IsMessageEnd(size_t n) const { return std::binary_search(message_ends_.begin(), message_ends_.end(), n); }

 private:
  SymbolPath path_;
  std::vector<TokenId> tokens_;    // per symbol; 0 for chunks
  std::vector<int32_t> chunk_of_;  // per symbol; index into chunks_ or -1
  std::vector<EmbeddingChunk> chunks_;
  std::vector<size_t> message_ends_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_PROMPT_H_
