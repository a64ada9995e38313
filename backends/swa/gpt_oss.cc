#include "backends/swa/gpt_oss.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/layers/layer_stack.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGptOss(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 131072));
  CAIRN_RETURN_IF_ERROR(CheckHeadCounts(ld, hp, HeadCountRule{}));
  const int64_t n_embd = hp.n_embd;
  m->eps = hp.eps;
  int64_t window = 0;
  CAIRN_LOAD_ASSIGN(window, ld.IntIn("attention.sliding_window", 1, int64_t{1} << 30));
  std::vector<bool> local;
  CAIRN_LOAD_ASSIGN(local, ReadSlidingWindowLayers(ld, hp.n_layer, window, 2));

  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  // The reference sizes every head by the rotated dimensions.
  const int32_t n_rot = m->rope.params.n_dims;
  if (n_rot != hp.head_dim_k || n_rot != hp.head_dim_v) {
    return ld.Error(absl::StrCat("rope.dimension_count ", n_rot, " must equal key_length and value_length (",
                                 hp.head_dim_k, ", ", hp.head_dim_v, ")"));
  }
  m->rope_local = m->rope;
  double swa_base = 0;
  CAIRN_LOAD_ASSIGN(swa_base, ld.FloatOr("rope.freq_base_swa", m->rope.params.freq_base));
  m->rope_local.params.freq_base = static_cast<float>(swa_base);

  MoeSpec moe;
  CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
  CAIRN_LOAD_ASSIGN(moe.n_ff, ld.IntIn("expert_feed_forward_length", 1, int64_t{1} << 20));
  moe.gating = RouterGating::kSoftmaxOfChosen;
  moe.activation = FfnActivation::kSwigluOai;
  moe.router_bias = Presence::kRequired;
  moe.expert_biases = Presence::kRequired;

  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, n_embd));
  if (!ld.HasTensor("output.weight")) return ld.Error("tensor 'output.weight' is missing");
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  AttentionTensors tensors;
  tensors.qkv_bias = Presence::kOptional;
  tensors.out_bias = Presence::kRequired;
  tensors.sinks = Presence::kRequired;
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    // post_attention_norm is the MoE's pre-norm: there is no ffn_norm.
    CAIRN_LOAD_ASSIGN(L.mixer_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "post_attention_norm.weight"), n_embd));
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, 0.0);
    a.window = local[il] ? static_cast<int32_t>(window) : 0;
    a.rope = local[il] ? &m->rope_local : &m->rope;
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, tensors, a));
    CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, n_embd, moe));
  }
  m->FinishLoad(ld, {.n_ctx_train = hp.n_ctx_train, .window = static_cast<int32_t>(window)});
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
