// qwen2: the llama wiring with NEOX RoPE and biases on q, k and v.
#include "backends/transformer/llama.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen2(const ModelLoader& loader) {
  LlamaVariant v;
  v.rope = RopeType::kNeox;
  v.tensors.qkv_bias = Presence::kRequired;
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
