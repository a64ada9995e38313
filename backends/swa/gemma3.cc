// gemma3: interleaved sliding-window attention (pattern and window from
// metadata, or a per-layer sliding_window_pattern array), local layers with
// the unscaled SWA RoPE base, global layers with the file's base and linear
// scaling; NEOX RoPE, per-head q/k RMS norms, sandwich norms, GeGLU (tanh),
// embeddings scaled by sqrt(n_embd), optional final logit soft cap. The
// family's other architecture is a variant of this wiring (gemma.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/layers/ffn.h"
#include "backends/swa/gemma.h"

namespace cairn {
namespace {

class GemmaModel final : public ArchModel {
 public:
  absl::Status Load(const ModelLoader& ld, const GemmaVariant& variant);
  void Forward(ForwardPass& pass) const override;

 private:
  struct Layer {
    int32_t slot = 0;
    std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;
    AttentionBlock attn;
    FfnBlock ffn;
  };

  float eps_ = 1e-6f;
  float embd_scale_ = 1.0f;
  PositionEncoding rope_global_, rope_local_;
  const TensorInfo* tok_embd_ = nullptr;
  OutputHead head_;
  std::vector<Layer> layers_;
};

absl::Status GemmaModel::Load(const ModelLoader& ld, const GemmaVariant& variant) {
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 8192));
  int32_t n_head_kv = 0;
  CAIRN_LOAD_ASSIGN(n_head_kv, UniformKvHeads(ld, hp));
  const int64_t n_embd = hp.n_embd;
  const int32_t n_layer = hp.n_layer;
  eps_ = hp.eps;
  int64_t window = 0;
  double f = 0;
  CAIRN_LOAD_ASSIGN(window, ld.IntInOr("attention.sliding_window", 0, int64_t{1} << 30, variant.default_window));
  std::vector<bool> local;
  CAIRN_LOAD_ASSIGN(local, ReadSlidingWindowLayers(ld, n_layer, window, variant.default_period));

  // RoPE: NEOX pairing; global layers with the file's base and linear
  // scaling, local layers with the SWA base.
  CAIRN_LOAD_ASSIGN(rope_global_.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  rope_local_ = rope_global_;
  const double swa_base = variant.default_swa_base < 0 ? rope_global_.params.freq_base : variant.default_swa_base;
  CAIRN_LOAD_ASSIGN(f, ld.FloatOr("rope.freq_base_swa", swa_base));
  rope_local_.params.freq_base = static_cast<float>(f);
  if (variant.local_rope_unscaled) rope_local_.params.freq_scale = 1.0f;

  // Scales. The 27B variants scale queries by 1/sqrt(n_embd / n_head)
  // (query_pre_attn_scalar), recognized by layer count as llama.cpp does.
  const float kq_scale = n_layer == variant.layers_of_27b
                             ? 1.0f / std::sqrt(static_cast<float>(n_embd / hp.n_head))
                             : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  double attn_softcap = 0, final_softcap = 0;
  if (variant.default_attn_softcap >= 0) {
    CAIRN_LOAD_ASSIGN(attn_softcap, ld.FloatOr("attn_logit_softcapping", variant.default_attn_softcap));
  }
  CAIRN_LOAD_ASSIGN(final_softcap, ld.FloatOr("final_logit_softcapping", variant.default_final_softcap));
  if (attn_softcap < 0 || final_softcap < 0) return ld.Error("negative logit soft cap");
  embd_scale_ = std::sqrt(static_cast<float>(n_embd));

  CAIRN_LOAD_ASSIGN(tok_embd_, LoadTokenEmbedding(ld, n_embd));
  CAIRN_LOAD_ASSIGN(head_, LoadOutputHead(ld, *tok_embd_, eps_));
  head_.softcap = static_cast<float>(final_softcap);
  const std::vector<int32_t> slots = NumberWindowedSlots(local, shape_);
  size_t weight_bytes = head_.output.bytes();
  layers_.resize(n_layer);
  const AttentionTensors tensors{Presence::kAbsent, Presence::kAbsent, variant.qk_norm};
  for (int il = 0; il < n_layer; ++il) {
    Layer& L = layers_[il];
    if (hp.n_ff[il] <= 0) return ld.Error(absl::StrCat("layer ", il, " has no FFN"));
    L.slot = slots[il];
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, n_head_kv, kq_scale);
    a.softcap = static_cast<float>(attn_softcap);
    a.window = local[il] ? static_cast<int32_t>(window) : 0;
    a.rope = local[il] ? &rope_local_ : &rope_global_;
    CAIRN_LOAD_ASSIGN(L.attn_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.post_attn_norm, ld.Vector(BlockTensor(il, "post_attention_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "ffn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.post_ffn_norm, ld.Vector(BlockTensor(il, "post_ffw_norm.weight"), n_embd));
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, tensors, a));
    CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, n_embd, hp.n_ff[il], FfnActivation::kGelu));
    weight_bytes += a.matrix_bytes() + L.ffn.matrix_bytes();
  }

  SetVocabulary(ld, *tok_embd_, hp.n_ctx_train);
  shape_.weight_bytes = weight_bytes;
  shape_.window = static_cast<int32_t>(window);
  shape_.k_dim = layers_[0].attn.k_dim();
  shape_.v_dim = layers_[0].attn.v_dim();
  return absl::OkStatus();
}

void GemmaModel::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd_, embd_scale_);
  float* out = pass.BlockOut();
  for (const Layer& L : layers_) {
    AttentionForward(L.attn, pass, L.slot, pass.Normed(L.attn_norm, eps_), out);
    pass.NormInPlace(out, L.post_attn_norm, eps_);
    pass.AddResidual(out);
    FfnForward(L.ffn, pass, pass.Normed(L.ffn_norm, eps_), out);
    pass.NormInPlace(out, L.post_ffn_norm, eps_);
    pass.AddResidual(out);
  }
  pass.Logits(head_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemmaStyle(const ModelLoader& loader, const GemmaVariant& variant) {
  return MakeArch<GemmaModel>(loader, variant);
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemma3(const ModelLoader& loader) {
  return LoadGemmaStyle(loader, GemmaVariant{});
}

}  // namespace cairn
