// The load steps this family's wiring files share (each loader reads its
// architecture into a LayerStack: backends/layers/layer_stack.h), and the
// loaders the family registers (hybrid_family.cc): granitehybrid.cc,
// qwen35.cc, qwen35moe.cc, qwen3next.cc, falcon_h1.cc, jamba.cc,
// nemotron_h.cc, lfm2.cc.
#ifndef CAIRN_BACKENDS_HYBRID_HYBRID_LOADING_H_
#define CAIRN_BACKENDS_HYBRID_HYBRID_LOADING_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/layer_stack.h"

namespace cairn {

// The memory dimensions of a hybrid's stack besides its attention slots
// (whose K/V widths FinishLoad takes from the blocks): recurrent slots of
// conv_floats + state_floats.
LayerStack::MemoryDims HybridDims(const DecoderHParams& hp, int64_t conv_floats, int64_t state_floats);

// Checks the attention layers' head counts (CheckHeadCounts under `rule`;
// nothing when there are none). INVALID_ARGUMENT when the file has no
// recurrent layer (n_recurrent 0: a transformer) or keys and values of
// different head sizes.
absl::Status CheckHybridHeads(const ModelLoader& loader, const DecoderHParams& hp,
                              const std::vector<int32_t>& attention_layers, int32_t n_recurrent, HeadCountRule rule);
// For the hybrids that mark their recurrent layers with head_count_kv 0
// (granitehybrid, jamba, lfm2): reads `hp` and checks the layers with
// head_count_kv > 0 (CheckHybridHeads).
absl::Status ReadKvMarkedHybrid(const ModelLoader& loader, HeadCountRule rule, DecoderHParams& hp);
// A layer's blk.<layer>.attn_norm.weight (its mixer's pre-norm) and its FFN
// pre-norm blk.<layer>.<ffn_norm> ([n_embd] each) into `layer`.
absl::Status LoadLayerNorms(const ModelLoader& loader, int32_t layer, int64_t n_embd, const char* ffn_norm,
                            LayerStack::Layer& into);
// A layer's FFN: a mixture of experts `moe` when `moe` is given, its
// experts of width moe->n_ff or, when that is 0, feed_forward_length[layer];
// else a dense SwiGLU of width feed_forward_length[layer]. A width taken
// from feed_forward_length must be positive.
absl::Status LoadSwiGluOrMoe(const ModelLoader& loader, int32_t layer, const DecoderHParams& hp, const MoeSpec* moe,
                             LayerStack::Layer& into);

// The loaders registered to the family (hybrid_family.cc).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadGraniteHybrid(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35Moe(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen3Next(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadFalconH1(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadJamba(const ModelLoader& loader);
// nemotron_h and nemotron_h_moe: one wiring, MoE layers when expert_count > 0.
absl::StatusOr<std::unique_ptr<ArchModel>> LoadNemotronH(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadLfm2(const ModelLoader& loader);

// What differs between the architectures of the qwen35 wiring.
struct QwenHybridVariant {
  const MoeSpec* moe = nullptr;  // null: dense FFNs; else a MoE FFN in every layer
  bool imrope = true;            // partial IMROPE (and embedding chunks), else partial NEOX over positions
  DeltaNetVariant delta_net = DeltaNetVariant::kQwen35;
};

// The qwen35 wiring (Gated DeltaNet layers, gated attention layers).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35Style(const ModelLoader& loader, const QwenHybridVariant& variant);

// The MoE of the Qwen hybrids: softmax router, the expert_used_count best
// renormalized, SwiGLU experts of expert_feed_forward_length (default
// feed_forward_length / expert_used_count), a SwiGLU shared expert of
// expert_shared_feed_forward_length (default feed_forward_length) scaled by
// sigmoid(ffn_gate_inp_shexp . x).
absl::StatusOr<MoeSpec> ReadQwenMoeSpec(const ModelLoader& loader);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_HYBRID_HYBRID_LOADING_H_
