// jamba (Jamba, Jamba Mini): Mamba-1 layers where head_count_kv[layer] is 0,
// attention layers elsewhere (no positional encoding at all, q.k scaled by
// 1/sqrt(head_dim)). The Mamba-1 mixers RMS-normalize dt, B and C with
// weights (ssm_{dt,b,c}_norm) before dt's projection and the scan. Every
// layer then has ffn_norm and an FFN: a mixture of experts where the layer
// has ffn_gate_inp (softmax over all experts, the expert_used_count best,
// weights neither renormalized nor scaled, SwiGLU experts), a dense SwiGLU
// elsewhere, both of width feed_forward_length.

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadJamba(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_RETURN_IF_ERROR(ReadKvMarkedHybrid(ld, HeadCountRule{.per_layer_kv_heads = true}, hp));

  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->mamba, ReadMambaGeometry(ld, MambaVersion::kMamba1));
  m->mamba.dt_b_c_rms = true;
  m->mamba.dt_b_c_norm_weights = true;
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));

  MoeSpec moe;
  if (ld.HasKey("expert_count")) CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
  moe.gating = RouterGating::kSoftmax;
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    CAIRN_RETURN_IF_ERROR(LoadLayerNorms(ld, il, hp.n_embd, "ffn_norm.weight", L));
    // The reference decides per layer by the router's presence.
    const bool routed = ld.HasTensor(BlockTensor(il, "ffn_gate_inp.weight"));
    if (routed && moe.n_expert == 0) {
      return ld.Error(absl::StrCat("layer ", il, " has a router but expert_count is missing"));
    }
    CAIRN_RETURN_IF_ERROR(LoadSwiGluOrMoe(ld, il, hp, routed ? &moe : nullptr, L));
    if (hp.n_head_kv[il] == 0) {
      L.mixer = LayerStack::Mixer::kMamba;
      CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, m->mamba, il));
      continue;
    }
    L.attn = DecoderAttention(hp, il, 0.0);
    CAIRN_RETURN_IF_ERROR(
        LoadAttention(ld, il, hp.n_embd, {Presence::kOptional, Presence::kAbsent, Presence::kAbsent}, L.attn));
  }

  m->FinishLoad(ld, HybridDims(hp, m->mamba.conv_state_floats(), m->mamba.ssm_state_floats()));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
