// gemma3: interleaved sliding-window attention (pattern and window from
// metadata, or a per-layer sliding_window_pattern array), local layers with
// the unscaled SWA RoPE base, global layers with the file's base and linear
// scaling; NEOX RoPE, per-head q/k RMS norms, sandwich norms, GeGLU (tanh),
// embeddings scaled by sqrt(n_embd), optional final logit soft cap. The
// family's other architecture is a variant of this wiring (gemma.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/layers/layer_stack.h"
#include "backends/swa/gemma.h"

namespace cairn {
namespace {

// The sandwich-normed attention and GeGLU of layer `il` into `L`.
absl::Status LoadGemmaLayer(const ModelLoader& ld, int il, const DecoderHParams& hp, const AttentionTensors& tensors,
                            LayerStack::Layer& L) {
  const int64_t n_embd = hp.n_embd;
  if (hp.n_ff[il] <= 0) return ld.Error(absl::StrCat("layer ", il, " has no FFN"));
  CAIRN_LOAD_ASSIGN(L.mixer_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
  CAIRN_LOAD_ASSIGN(L.post_mixer_norm, ld.Vector(BlockTensor(il, "post_attention_norm.weight"), n_embd));
  CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "ffn_norm.weight"), n_embd));
  CAIRN_LOAD_ASSIGN(L.post_ffn_norm, ld.Vector(BlockTensor(il, "post_ffw_norm.weight"), n_embd));
  CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, tensors, L.attn));
  CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, n_embd, hp.n_ff[il], FfnActivation::kGelu));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemmaStyle(const ModelLoader& ld, const GemmaVariant& variant) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 8192));
  CAIRN_RETURN_IF_ERROR(CheckHeadCounts(ld, hp, HeadCountRule{}));
  const int64_t n_embd = hp.n_embd;
  const int32_t n_layer = hp.n_layer;
  m->eps = hp.eps;
  int64_t window = 0;
  double f = 0;
  CAIRN_LOAD_ASSIGN(window, ld.IntInOr("attention.sliding_window", 0, int64_t{1} << 30, variant.default_window));
  std::vector<bool> local;
  CAIRN_LOAD_ASSIGN(local, ReadSlidingWindowLayers(ld, n_layer, window, variant.default_period));

  // RoPE: NEOX pairing; global layers with the file's base and linear
  // scaling, local layers with the SWA base.
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  m->rope_local = m->rope;
  const double swa_base = variant.default_swa_base < 0 ? m->rope.params.freq_base : variant.default_swa_base;
  CAIRN_LOAD_ASSIGN(f, ld.FloatOr("rope.freq_base_swa", swa_base));
  m->rope_local.params.freq_base = static_cast<float>(f);
  if (variant.local_rope_unscaled) m->rope_local.params.freq_scale = 1.0f;

  // Scales. The 27B variants scale queries by 1/sqrt(n_embd / n_head)
  // (query_pre_attn_scalar), recognized by layer count as llama.cpp does.
  const float kq_scale = n_layer == variant.layers_of_27b ? 1.0f / std::sqrt(static_cast<float>(n_embd / hp.n_head))
                                                          : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  double attn_softcap = 0, final_softcap = 0;
  if (variant.default_attn_softcap >= 0) {
    CAIRN_LOAD_ASSIGN(attn_softcap, ld.FloatOr("attn_logit_softcapping", variant.default_attn_softcap));
  }
  CAIRN_LOAD_ASSIGN(final_softcap, ld.FloatOr("final_logit_softcapping", variant.default_final_softcap));
  if (attn_softcap < 0 || final_softcap < 0) return ld.Error("negative logit soft cap");
  m->embedding_scale = std::sqrt(static_cast<float>(n_embd));

  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->head.softcap = static_cast<float>(final_softcap);
  m->layers.resize(n_layer);
  const AttentionTensors tensors{Presence::kAbsent, Presence::kAbsent, variant.qk_norm};
  for (int il = 0; il < n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, kq_scale);
    a.softcap = static_cast<float>(attn_softcap);
    a.window = local[il] ? static_cast<int32_t>(window) : 0;
    a.rope = local[il] ? &m->rope_local : &m->rope;
    CAIRN_RETURN_IF_ERROR(LoadGemmaLayer(ld, il, hp, tensors, L));
  }
  m->FinishLoad(ld, {.n_ctx_train = hp.n_ctx_train, .window = static_cast<int32_t>(window)});
  return std::unique_ptr<ArchModel>(std::move(m));
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemma3(const ModelLoader& loader) {
  return LoadGemmaStyle(loader, GemmaVariant{});
}

}  // namespace cairn
