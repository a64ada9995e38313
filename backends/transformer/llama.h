// The llama-style decoder, shared by the architectures of this family that
// hold the same blocks: x += attn(RMSNorm(x)), x += FFN(RMSNorm(x)) (SwiGLU,
// or a mixture of SwiGLU experts), the last layer computing only the rows
// whose logits are wanted. What differs per architecture is a LlamaVariant
// (llama.cc, qwen2.cc, qwen3.cc, qwen3moe.cc, deci.cc).
#ifndef CAIRN_BACKENDS_TRANSFORMER_LLAMA_H_
#define CAIRN_BACKENDS_TRANSFORMER_LLAMA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/kernels/rope.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/attention.h"
#include "backends/layers/moe.h"

namespace cairn {

struct LlamaVariant {
  RopeType rope = RopeType::kNormal;
  AttentionTensors tensors{Presence::kOptional, Presence::kOptional, Presence::kOptional};
  // "<arch>.attention.scale" replaces 1/sqrt(head_dim) when set (llama).
  bool honours_attention_scale = false;
  // Every layer's FFN is this mixture of experts instead of a dense one.
  const MoeSpec* moe = nullptr;
  // Which head counts the architecture takes per layer (deci: both; the
  // others one count, as the reference reads them).
  HeadCountRule heads;
};

// The llama layers of `loader`'s model, as `variant` says, in a LayerStack.
absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlamaStyle(const ModelLoader& loader, const LlamaVariant& variant);

// The loaders registered to the family (transformer_family.cc).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlama(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen2(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3Moe(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadDeci(const ModelLoader& loader);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_TRANSFORMER_LLAMA_H_
