// falcon-h1 (Falcon-H1): every layer runs attention and Mamba-2 side by side
// on the same RMSNorm(x, attn_norm), x += attn + mamba2, then
// x += SwiGLU(RMSNorm(x, ffn_norm)) (the norm tensor is blk.N.ffn_norm,
// without a .weight suffix). Attention: NEOX RoPE over rope.dimension_count
// (rope_freqs factors are not applied, as in the reference graph), q.k
// scaled by 1/sqrt(value_length), optional q/k/v biases (an attn_output bias
// is not applied, as in the reference). Mamba-2: d_inner from ssm.inner_size,
// conv bias, optional grouped norm. Each layer owns an attention slot and a
// recurrent slot of the hybrid memory.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadFalconH1(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  // Every layer has attention and a recurrent mixer.
  std::vector<int32_t> all_layers(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) all_layers[il] = il;
  CAIRN_RETURN_IF_ERROR(CheckHybridHeads(ld, hp, all_layers, hp.n_layer, HeadCountRule{}));
  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hp.head_dim_k));
  m->rope.params.freq_factors.clear();
  CAIRN_LOAD_ASSIGN(m->mamba, ReadMambaGeometry(ld, MambaVersion::kMamba2));
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));

  const double kq_scale = 1.0 / std::sqrt(static_cast<float>(hp.head_dim_v));
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    L.mixer = LayerStack::Mixer::kAttentionAndMamba;
    CAIRN_RETURN_IF_ERROR(LoadLayerNorms(ld, il, hp.n_embd, "ffn_norm", L));
    for (const char* bias : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"}) {
      if (ld.HasTensor(BlockTensor(il, bias))) {
        return absl::UnimplementedError(
            absl::StrCat("model '", ld.file().path(), "': FFN biases (", BlockTensor(il, bias), ") are not supported"));
      }
    }
    CAIRN_RETURN_IF_ERROR(LoadSwiGluOrMoe(ld, il, hp, nullptr, L));
    CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, m->mamba, il));
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, kq_scale);
    a.rope = &m->rope;
    AttentionTensors tensors;
    tensors.out_bias = Presence::kAbsent;
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, hp.n_embd, tensors, a));
  }

  m->FinishLoad(ld, HybridDims(hp, m->mamba.conv_state_floats(), m->mamba.ssm_state_floats()));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
