// lfm2 (LFM2): gated short-convolution layers where head_count_kv[layer] is
// 0 (shortconv.l_cache-tap causal conv of B * x, times C: short_conv_mixer.h),
// attention layers elsewhere (per-head q/k RMS norms, NEOX RoPE, q.k scaled
// by 1/sqrt(head_dim), optional q/k/v biases). Every layer is
// x += mixer(RMSNorm(x, attn_norm)) then x += SwiGLU(RMSNorm(x, ffn_norm)).
// The final norm is token_embd_norm (there is no output_norm); the output is
// tied to token_embd unless the file has output.weight. Not supported
// (UNIMPLEMENTED): sliding-window attention layers (attention.sliding_window).

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadLfm2(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  int64_t window = 0;
  CAIRN_LOAD_ASSIGN(window, ld.IntOr("attention.sliding_window", 0));
  if (window > 0) {
    return absl::UnimplementedError(
        absl::StrCat("model '", ld.file().path(), "': sliding-window attention (attention.sliding_window) in lfm2"));
  }
  DecoderHParams hp;
  CAIRN_RETURN_IF_ERROR(ReadKvMarkedHybrid(ld, HeadCountRule{.per_layer_kv_heads = true}, hp));

  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  CAIRN_LOAD_ASSIGN(m->short_conv, ReadShortConvGeometry(ld));
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps, "token_embd_norm.weight"));
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    CAIRN_RETURN_IF_ERROR(LoadLayerNorms(ld, il, hp.n_embd, "ffn_norm.weight", L));
    CAIRN_RETURN_IF_ERROR(LoadSwiGluOrMoe(ld, il, hp, nullptr, L));
    if (hp.n_head_kv[il] == 0) {
      L.mixer = LayerStack::Mixer::kShortConv;
      CAIRN_LOAD_ASSIGN(L.short_conv, LoadShortConv(ld, m->short_conv, il));
      continue;
    }
    L.attn = DecoderAttention(hp, il, 0.0);
    L.attn.rope = &m->rope;
    CAIRN_RETURN_IF_ERROR(
        LoadAttention(ld, il, hp.n_embd, {Presence::kOptional, Presence::kAbsent, Presence::kRequired}, L.attn));
  }

  // A short convolution carries conv inputs only: no recurrent state.
  m->FinishLoad(ld, HybridDims(hp, m->short_conv.conv_state_floats(), 0));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
