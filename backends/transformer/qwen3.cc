// qwen3: the llama wiring with NEOX RoPE and per-head RMS norms of q and k
// (before RoPE); head size from attention.key_length.
#include "backends/transformer/llama.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3(const ModelLoader& loader) {
  LlamaVariant v;
  v.rope = RopeType::kNeox;
  v.tensors.qk_norm = Presence::kRequired;
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
