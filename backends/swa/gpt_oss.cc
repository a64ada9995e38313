#include "backends/swa/gpt_oss.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/layers/attention.h"
#include "backends/layers/moe.h"

namespace cairn {
namespace {

class GptOssModel final : public ArchModel {
 public:
  absl::Status Load(const ModelLoader& ld);
  void Forward(ForwardPass& pass) const override;

 private:
  struct Layer {
    int32_t slot = 0;
    std::vector<float> attn_norm, ffn_norm;
    AttentionBlock attn;
    MoeBlock moe;
  };

  float eps_ = 1e-5f;
  PositionEncoding rope_global_, rope_local_;
  const TensorInfo* tok_embd_ = nullptr;
  OutputHead head_;
  std::vector<Layer> layers_;
};

absl::Status GptOssModel::Load(const ModelLoader& ld) {
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 131072));
  int32_t n_head_kv = 0;
  CAIRN_LOAD_ASSIGN(n_head_kv, UniformKvHeads(ld, hp));
  const int64_t n_embd = hp.n_embd;
  eps_ = hp.eps;
  int64_t window = 0;
  CAIRN_LOAD_ASSIGN(window, ld.IntIn("attention.sliding_window", 1, int64_t{1} << 30));
  std::vector<bool> local;
  CAIRN_LOAD_ASSIGN(local, ReadSlidingWindowLayers(ld, hp.n_layer, window, 2));

  CAIRN_LOAD_ASSIGN(rope_global_.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  // The reference sizes every head by the rotated dimensions.
  const int32_t n_rot = rope_global_.params.n_dims;
  if (n_rot != hp.head_dim_k || n_rot != hp.head_dim_v) {
    return ld.Error(absl::StrCat("rope.dimension_count ", n_rot, " must equal key_length and value_length (",
                                 hp.head_dim_k, ", ", hp.head_dim_v, ")"));
  }
  rope_local_ = rope_global_;
  double swa_base = 0;
  CAIRN_LOAD_ASSIGN(swa_base, ld.FloatOr("rope.freq_base_swa", rope_global_.params.freq_base));
  rope_local_.params.freq_base = static_cast<float>(swa_base);

  MoeSpec moe;
  CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
  CAIRN_LOAD_ASSIGN(moe.n_ff, ld.IntIn("expert_feed_forward_length", 1, int64_t{1} << 20));
  moe.gating = RouterGating::kSoftmaxOfChosen;
  moe.activation = FfnActivation::kSwigluOai;
  moe.router_bias = Presence::kRequired;
  moe.expert_biases = Presence::kRequired;

  CAIRN_LOAD_ASSIGN(tok_embd_, LoadTokenEmbedding(ld, n_embd));
  if (!ld.HasTensor("output.weight")) return ld.Error("tensor 'output.weight' is missing");
  CAIRN_LOAD_ASSIGN(head_, LoadOutputHead(ld, *tok_embd_, eps_));
  const std::vector<int32_t> slots = NumberWindowedSlots(local, shape_);
  AttentionTensors tensors;
  tensors.qkv_bias = Presence::kOptional;
  tensors.out_bias = Presence::kRequired;
  tensors.sinks = Presence::kRequired;
  size_t weight_bytes = head_.output.bytes();
  layers_.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    Layer& L = layers_[il];
    L.slot = slots[il];
    CAIRN_LOAD_ASSIGN(L.attn_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "post_attention_norm.weight"), n_embd));
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, n_head_kv, 0.0);
    a.window = local[il] ? static_cast<int32_t>(window) : 0;
    a.rope = local[il] ? &rope_local_ : &rope_global_;
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, tensors, a));
    CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, n_embd, moe));
    weight_bytes += a.matrix_bytes() + L.moe.bytes_per_row();
  }

  SetVocabulary(ld, *tok_embd_, hp.n_ctx_train);
  shape_.weight_bytes = weight_bytes;
  shape_.window = static_cast<int32_t>(window);
  shape_.k_dim = layers_[0].attn.k_dim();
  shape_.v_dim = layers_[0].attn.v_dim();
  return absl::OkStatus();
}

void GptOssModel::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd_);
  float* out = pass.BlockOut();
  for (const Layer& L : layers_) {
    AttentionForward(L.attn, pass, L.slot, pass.Normed(L.attn_norm, eps_), out);
    pass.AddResidual(out);
    MoeForward(L.moe, pass, pass.Normed(L.ffn_norm, eps_), out);
    pass.AddResidual(out);
  }
  pass.Logits(head_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGptOss(const ModelLoader& loader) {
  return MakeArch<GptOssModel>(loader);
}

}  // namespace cairn
