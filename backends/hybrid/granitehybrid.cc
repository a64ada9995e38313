// granitehybrid (Granite 4.0 H): Mamba-2 layers where head_count_kv[layer]
// is 0, attention layers elsewhere (no positional encoding unless
// rope.scaling.finetuned), SwiGLU FFNs; the embedding, each residual branch
// and the logits scaled by the file's embedding_scale, residual_scale and
// logit_scale (0 or absent: not applied). With expert_count (Granite 4.0 H
// Tiny/Small) every FFN is a mixture of experts: softmax router, the
// expert_used_count best renormalized, SwiGLU experts of feed_forward_length,
// plus an ungated SwiGLU shared expert of expert_shared_feed_forward_length.

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGraniteHybrid(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_RETURN_IF_ERROR(ReadKvMarkedHybrid(ld, HeadCountRule{.per_layer_heads = true, .per_layer_kv_heads = true}, hp));
  double attn_scale = 0, embedding_scale = 0, residual_scale = 0, logit_scale = 0;
  bool rope = false;
  CAIRN_LOAD_ASSIGN(attn_scale, ld.FloatOr("attention.scale", 0.0));
  CAIRN_LOAD_ASSIGN(rope, ld.BoolOr("rope.scaling.finetuned", false));
  if (rope) CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNormal, hp.head_dim_k));
  CAIRN_LOAD_ASSIGN(embedding_scale, ld.FloatOr("embedding_scale", 0.0));
  CAIRN_LOAD_ASSIGN(residual_scale, ld.FloatOr("residual_scale", 0.0));
  CAIRN_LOAD_ASSIGN(logit_scale, ld.FloatOr("logit_scale", 0.0));
  m->eps = hp.eps;
  m->embedding_scale = embedding_scale != 0.0 ? static_cast<float>(embedding_scale) : 1.0f;
  m->residual_scale = residual_scale != 0.0 ? static_cast<float>(residual_scale) : 1.0f;
  CAIRN_LOAD_ASSIGN(m->mamba, ReadMambaGeometry(ld, MambaVersion::kMamba2));
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->head.logit_scale = static_cast<float>(logit_scale);

  MoeSpec moe;
  if (ld.HasKey("expert_count")) {
    CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
    CAIRN_LOAD_ASSIGN(moe.n_ff_shared, ld.IntInOr("expert_shared_feed_forward_length", 0, int64_t{1} << 20, 0));
    moe.normalize = true;
  }
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    CAIRN_RETURN_IF_ERROR(LoadLayerNorms(ld, il, hp.n_embd, "ffn_norm.weight", L));
    CAIRN_RETURN_IF_ERROR(LoadSwiGluOrMoe(ld, il, hp, moe.n_expert > 0 ? &moe : nullptr, L));
    if (hp.n_head_kv[il] == 0) {
      L.mixer = LayerStack::Mixer::kMamba;
      CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, m->mamba, il));
      continue;
    }
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, attn_scale);
    a.rope = rope ? &m->rope : nullptr;
    CAIRN_RETURN_IF_ERROR(
        LoadAttention(ld, il, hp.n_embd, {Presence::kAbsent, Presence::kAbsent, Presence::kAbsent}, a));
  }

  m->FinishLoad(ld, HybridDims(hp, m->mamba.conv_state_floats(), m->mamba.ssm_state_floats()));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
