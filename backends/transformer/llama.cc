// llama: x += attn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)); GQA with one K/V
// width for every layer, NORMAL RoPE (optionally with rope_freqs factors and
// linear scaling), optional biases, tied or untied output. The family's other
// architectures are variants of this wiring (llama.h).
#include "absl/strings/str_cat.h"
#include "backends/layers/ffn.h"
#include "backends/transformer/llama.h"

namespace cairn {
namespace {

class LlamaModel final : public ArchModel {
 public:
  absl::Status Load(const ModelLoader& ld, const LlamaVariant& variant);
  void Forward(ForwardPass& pass) const override;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    AttentionBlock attn;
    FfnBlock ffn;  // unless moe.n_expert > 0
    MoeBlock moe;
  };

  float eps_ = 1e-5f;
  PositionEncoding rope_;
  const TensorInfo* tok_embd_ = nullptr;
  OutputHead head_;
  std::vector<Layer> layers_;
};

absl::Status LlamaModel::Load(const ModelLoader& ld, const LlamaVariant& variant) {
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 2048));
  int32_t n_head_kv = 0;
  CAIRN_LOAD_ASSIGN(n_head_kv, UniformKvHeads(ld, hp));
  eps_ = hp.eps;
  double attn_scale = 0;
  CAIRN_LOAD_ASSIGN(rope_.params, ReadRope(ld, variant.rope, hp.head_dim_k));
  CAIRN_LOAD_ASSIGN(attn_scale, ld.FloatOr("attention.scale", 0.0));

  const int64_t n_embd = hp.n_embd;
  CAIRN_LOAD_ASSIGN(tok_embd_, LoadTokenEmbedding(ld, n_embd));
  CAIRN_LOAD_ASSIGN(head_, LoadOutputHead(ld, *tok_embd_, eps_));
  size_t weight_bytes = head_.output.bytes();
  layers_.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    Layer& L = layers_[il];
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, n_head_kv, variant.honours_attention_scale ? attn_scale : 0.0);
    a.rope = &rope_;
    CAIRN_LOAD_ASSIGN(L.attn_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "ffn_norm.weight"), n_embd));
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, variant.tensors, a));
    if (variant.moe != nullptr) {
      CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, n_embd, *variant.moe));
      weight_bytes += a.matrix_bytes() + L.moe.bytes_per_row();
      continue;
    }
    CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, n_embd, hp.n_ff[il], FfnActivation::kSilu));
    weight_bytes += a.matrix_bytes() + L.ffn.matrix_bytes();
  }

  SetVocabulary(ld, *tok_embd_, hp.n_ctx_train);
  shape_.weight_bytes = weight_bytes;
  shape_.n_full_slots = hp.n_layer;
  shape_.k_dim = layers_[0].attn.k_dim();
  shape_.v_dim = layers_[0].attn.v_dim();
  return absl::OkStatus();
}

void LlamaModel::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd_);
  float* out = pass.BlockOut();
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& L = layers_[il];
    // The last layer's output feeds only the logits: past its attention it
    // works on the wanted rows alone.
    const bool last = il + 1 == layers_.size();
    AttentionForward(L.attn, pass, static_cast<int32_t>(il), pass.Normed(L.attn_norm, eps_), out,
                     last ? QueryRows::kWanted : QueryRows::kAll);
    if (last) pass.KeepWantedRows();
    pass.AddResidual(out);
    const float* fn = pass.Normed(L.ffn_norm, eps_);
    if (L.moe.n_expert > 0) {
      MoeForward(L.moe, pass, fn, out);
    } else {
      FfnForward(L.ffn, pass, fn, out);
    }
    pass.AddResidual(out);
  }
  pass.Logits(head_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlamaStyle(const ModelLoader& loader, const LlamaVariant& variant) {
  return MakeArch<LlamaModel>(loader, variant);
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlama(const ModelLoader& loader) {
  LlamaVariant v;
  v.honours_attention_scale = true;
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
