// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): the qwen3 wiring with a
// mixture of experts in every layer: softmax router, the expert_used_count
// best of expert_count renormalized to sum 1, SwiGLU experts of
// expert_feed_forward_length (default feed_forward_length / used); no shared
// expert.
#include "backends/transformer/llama.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3Moe(const ModelLoader& loader) {
  MoeSpec moe;
  CAIRN_RETURN_IF_ERROR(ReadExpertCounts(loader, moe));
  int64_t n_ff = 0;
  CAIRN_LOAD_ASSIGN(n_ff, loader.IntInOr("feed_forward_length", 0, int64_t{1} << 20, 0));
  CAIRN_LOAD_ASSIGN(moe.n_ff, loader.IntInOr("expert_feed_forward_length", 1, int64_t{1} << 20, n_ff / moe.n_used));
  moe.normalize = true;
  LlamaVariant v;
  v.rope = RopeType::kNeox;
  v.tensors.qk_norm = Presence::kRequired;
  v.moe = &moe;
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
