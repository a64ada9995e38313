#include "checkpoint/prompt.h"

#include "checkpoint/hash.h"

namespace cairn::checkpoint {

SymbolKey ChunkKey(const EmbeddingChunk& chunk, int32_t n_embd) {
  Hash64 h(0x63686b);  // "chk": separates chunk hashes from other uses
  const int32_t dims[3] = {chunk.nx, chunk.ny, n_embd};
  h.Update(dims, sizeof(dims));
  h.Update(chunk.rows, sizeof(float) * static_cast<size_t>(chunk.n_rows()) * n_embd);
  return h.Finish() | kChunkKeyBit;
}

namespace {
Hash64 PathHash(std::string_view tenant) {
  Hash64 h(0x706174);  // "pat"
  const uint64_t n = tenant.size();
  h.Update(&n, sizeof(n));
  h.Update(tenant.data(), tenant.size());
  return h;
}
}  // namespace

uint64_t PathKey(std::string_view tenant, std::span<const SymbolKey> path) {
  Hash64 h = PathHash(tenant);
  h.Update(path.data(), path.size() * sizeof(SymbolKey));
  return h.Finish() | 1;  // never 0 ("unknown")
}

std::vector<uint64_t> PrefixPathKeys(std::string_view tenant, std::span<const SymbolKey> path, size_t from, size_t to) {
  to = std::min(to, path.size());
  std::vector<uint64_t> keys;
  if (from >= to) return keys;
  keys.resize(to - from);
  Hash64 h = PathHash(tenant);
  h.Update(path.data(), from * sizeof(SymbolKey));
  for (size_t k = from; k < to; ++k) {
    h.Update(&path[k], sizeof(SymbolKey));
    keys[to - 1 - k] = h.Finish() | 1;
  }
  return keys;
}

absl::Status Prompt::AddChunk(const EmbeddingChunk& chunk, int32_t n_embd) {
  if (chunk.rows == nullptr || chunk.nx <= 0 || chunk.ny <= 0 || n_embd <= 0) {
    return absl::InvalidArgumentError("embedding chunk needs rows, nx > 0, ny > 0 and n_embd > 0");
  }
  path_.Push(ChunkKey(chunk, n_embd), ChunkSpan(chunk));
  tokens_.push_back(0);
  chunk_of_.push_back(static_cast<int32_t>(chunks_.size()));
  chunks_.push_back(chunk);
  return absl::OkStatus();
}

}  // namespace cairn::checkpoint
