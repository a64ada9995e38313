// qwen3next (Qwen3-Next): the qwen35 layer stack (Gated DeltaNet layers,
// gated attention every full_attention_interval-th layer, per-head q/k RMS
// norms, post_attention_norm before the FFN) with the qwen35moe mixture of
// experts in every layer, and two differences: partial NEOX RoPE over plain
// positions (no M-RoPE sections, no embedding chunks), and the DeltaNet of
// DeltaNetVariant::kQwen3Next (beta and alpha from one ssm_ba projection,
// value head h reading key head h / (value heads / key heads)).
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3Next(const ModelLoader& ld) {
  MoeSpec moe;
  CAIRN_LOAD_ASSIGN(moe, ReadQwenMoeSpec(ld));
  QwenHybridVariant variant;
  variant.moe = &moe;
  variant.imrope = false;
  variant.delta_net = DeltaNetVariant::kQwen3Next;
  return LoadQwen35Style(ld, variant);
}

}  // namespace cairn
