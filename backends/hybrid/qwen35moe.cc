// qwen35moe (Qwen3.5 / Qwen3.6-35B-A3B): the qwen35 wiring with a mixture
// of experts in every layer: softmax router over expert_count experts, the
// expert_used_count best, their weights renormalized to sum 1; SwiGLU experts
// of expert_feed_forward_length; a SwiGLU shared expert of
// expert_shared_feed_forward_length scaled by sigmoid(ffn_gate_inp_shexp . x).
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<MoeSpec> ReadQwenMoeSpec(const ModelLoader& ld) {
  MoeSpec moe;
  CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
  int64_t n_ff = 0;
  CAIRN_LOAD_ASSIGN(n_ff, ld.IntInOr("feed_forward_length", 0, int64_t{1} << 20, 0));
  CAIRN_LOAD_ASSIGN(moe.n_ff, ld.IntInOr("expert_feed_forward_length", 1, int64_t{1} << 20, n_ff / moe.n_used));
  CAIRN_LOAD_ASSIGN(moe.n_ff_shared, ld.IntInOr("expert_shared_feed_forward_length", 0, int64_t{1} << 20, n_ff));
  moe.gating = RouterGating::kSoftmax;
  moe.normalize = true;
  moe.shared_gate = Presence::kRequired;
  return moe;
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35Moe(const ModelLoader& ld) {
  MoeSpec moe;
  CAIRN_LOAD_ASSIGN(moe, ReadQwenMoeSpec(ld));
  QwenHybridVariant variant;
  variant.moe = &moe;
  return LoadQwen35Style(ld, variant);
}

}  // namespace cairn
