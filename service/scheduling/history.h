// A session's conversation as the service records it: tokens and whole
// embedding chunks (with their rows, so that a history can be sent again,
// exported and imported) plus message boundaries.
//
// The history is the source of truth; the checkpoint engine's live sequence
// is a cache of it. Every Generate brings the sequence to the history (plus
// the new prompt) through CheckpointEngine::Prefill, which recomputes only
// where they differ, so a rewind or a failed request needs no repair.
#ifndef CAIRN_SERVICE_SCHEDULING_HISTORY_H_
#define CAIRN_SERVICE_SCHEDULING_HISTORY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "backends/memory.h"
#include "checkpoint/prompt.h"

namespace cairn::service {

struct ChunkData {
  std::vector<float> rows;  // [nx * ny][width]
  int32_t width = 0;
  int32_t nx = 0;
  int32_t ny = 0;
};

struct HistoryItem {
  TokenId token = -1;                      // when chunk is null
  std::shared_ptr<const ChunkData> chunk;  // immutable, shared by copies
  bool is_chunk() const { return chunk != nullptr; }
};

// Value type (chunks are shared, immutable). Not thread-safe.
struct History {
  std::vector<HistoryItem> items;
  std::vector<size_t> message_ends;  // ascending symbol counts

  size_t size() const { return items.size(); }
  bool empty() const { return items.empty(); }
  void AddToken(TokenId t) { items.push_back({t, nullptr}); }
  void AddChunk(std::shared_ptr<const ChunkData> c) { items.push_back({-1, std::move(c)}); }
  void EndMessage() {
    if (!items.empty() && (message_ends.empty() || message_ends.back() != items.size())) {
      message_ends.push_back(items.size());
    }
  }
  void Append(const History& other) {
    const size_t base = items.size();
    items.insert(items.end(), other.items.begin(), other.items.end());
    for (size_t e : other.message_ends) {
      if (message_ends.empty() || message_ends.back() < base + e) message_ends.push_back(base + e);
    }
  }
  void Resize(size_t n) {
    if (n < items.size()) items.resize(n);
    while (!message_ends.empty() && message_ends.back() > items.size()) message_ends.pop_back();
  }
  // Positions the first n items occupy (a chunk spans max(nx, ny)).
  Pos PositionsOf(size_t n) const {
    Pos p = 0;
    for (size_t i = 0; i < n && i < items.size(); ++i) {
      p += items[i].is_chunk() ? std::max(items[i].chunk->nx, items[i].chunk->ny) : 1;
    }
    return p;
  }
  // Rows the first n items occupy in a sequence memory: a token one, a chunk
  // its nx * ny embedding rows (at least its positions).
  int64_t RowsOf(size_t n) const {
    int64_t r = 0;
    for (size_t i = 0; i < n && i < items.size(); ++i) {
      r += items[i].is_chunk() ? std::max<int64_t>(int64_t{items[i].chunk->nx} * items[i].chunk->ny,
                                                   std::max(items[i].chunk->nx, items[i].chunk->ny))
                               : 1;
    }
    return r;
  }
  std::vector<TokenId> Tokens() const {
    std::vector<TokenId> out;
    out.reserve(items.size());
    for (const auto& it : items) out.push_back(it.is_chunk() ? -1 : it.token);
    return out;
  }

  // The engine's view of the first n items (all when n exceeds the size).
  // The prompt borrows chunk rows: this history must outlive it.
  absl::Status ToPrompt(int32_t n_embd, checkpoint::Prompt* prompt, size_t n = SIZE_MAX) const {
    n = std::min(n, items.size());
    size_t next_end = 0;
    for (size_t i = 0; i < n; ++i) {
      const HistoryItem& it = items[i];
      if (it.is_chunk()) {
        EmbeddingChunk c{it.chunk->rows.data(), it.chunk->nx, it.chunk->ny};
        if (absl::Status s = prompt->AddChunk(c, n_embd); !s.ok()) return s;
      } else {
        prompt->AddToken(it.token);
      }
      while (next_end < message_ends.size() && message_ends[next_end] <= i + 1) {
        if (message_ends[next_end] == i + 1) prompt->EndMessage();
        ++next_end;
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_HISTORY_H_
