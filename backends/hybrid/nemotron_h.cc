// nemotron_h (Nemotron-H, Nemotron Nano 2) and nemotron_h_moe (Nemotron 3
// Nano): every layer is x += block(RMSNorm(x, attn_norm)) with ONE block,
// chosen by the per-layer arrays head_count_kv and feed_forward_length:
//   both 0        Mamba-2 (grouped RMSNorm, conv bias)
//   ff 0, kv > 0  attention (no positional encoding, q.k scaled by
//                 1/sqrt(key_length), optional q/k/v/output biases)
//   ff > 0        an MLP: up, squared ReLU, down (no gate); or, when the
//                 file has expert_count > 0, a mixture of experts: router
//                 sigmoid(ffn_gate_inp . x), the expert_used_count best by
//                 sigmoid + exp_probs_b (the bias only selects), weights the
//                 chosen sigmoids, divided by their sum when
//                 expert_weights_norm, times expert_weights_scale; experts
//                 up -> squared ReLU -> down of expert_feed_forward_length,
//                 plus an ungated shared expert of the same kind
//                 (expert_shared_feed_forward_length).
// Both architectures are this one wiring, as in the reference. MLP layers
// hold no memory. Not supported (UNIMPLEMENTED): MLP biases and the latent
// MoE projections (moe_latent_size) of the larger Nemotron 3 models.

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_loading.h"

namespace cairn {
namespace {

absl::Status Unsupported(const ModelLoader& ld, absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat("model '", ld.file().path(), "': ", what, " is not supported"));
}

absl::StatusOr<MoeSpec> ReadNemotronMoe(const ModelLoader& ld) {
  MoeSpec moe;
  CAIRN_RETURN_IF_ERROR(ReadExpertCounts(ld, moe));
  int64_t latent = 0;
  CAIRN_LOAD_ASSIGN(latent, ld.IntOr("moe_latent_size", 0));
  if (latent != 0) return Unsupported(ld, "a latent MoE (moe_latent_size)");
  CAIRN_LOAD_ASSIGN(moe.n_ff, ld.IntIn("expert_feed_forward_length", 1, int64_t{1} << 20));
  CAIRN_LOAD_ASSIGN(moe.n_ff_shared, ld.IntIn("expert_shared_feed_forward_length", 1, int64_t{1} << 20));
  double scale = 0;
  CAIRN_LOAD_ASSIGN(moe.normalize, ld.BoolOr("expert_weights_norm", false));
  CAIRN_LOAD_ASSIGN(scale, ld.FloatOr("expert_weights_scale", 0.0));
  moe.scale = static_cast<float>(scale);
  moe.gating = RouterGating::kSigmoid;
  moe.selection_bias = Presence::kRequired;
  moe.activation = FfnActivation::kReluSquared;
  moe.gated_experts = false;
  moe.gated_shared = false;
  return moe;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadNemotronH(const ModelLoader& ld) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  using Mixer = LayerStack::Mixer;
  std::vector<int32_t> attention_layers;
  int32_t n_mamba = 0;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_ff[il] != 0) continue;
    if (hp.n_head_kv[il] != 0) {
      attention_layers.push_back(il);
    } else {
      ++n_mamba;
    }
  }
  CAIRN_RETURN_IF_ERROR(CheckHybridHeads(ld, hp, attention_layers, n_mamba,
                                         HeadCountRule{.per_layer_heads = true, .per_layer_kv_heads = true}));

  MoeSpec moe;
  int64_t n_expert = 0;
  CAIRN_LOAD_ASSIGN(n_expert, ld.IntInOr("expert_count", 0, 4096, 0));
  if (n_expert != 0) CAIRN_LOAD_ASSIGN(moe, ReadNemotronMoe(ld));

  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->mamba, ReadMambaGeometry(ld, MambaVersion::kMamba2));
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    std::vector<float> norm;
    CAIRN_LOAD_ASSIGN(norm, ld.F32(BlockTensor(il, "attn_norm.weight"), {hp.n_embd}));
    if (hp.n_ff[il] > 0) {
      // The FFN is the layer's one block: the FFN half of the stack, under
      // the layer's only norm.
      L.mixer = Mixer::kNone;
      L.ffn_norm = std::move(norm);
      if (moe.n_expert > 0) {
        CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, hp.n_embd, moe));
        continue;
      }
      for (const char* bias : {"ffn_up.bias", "ffn_down.bias"}) {
        if (ld.HasTensor(BlockTensor(il, bias))) return Unsupported(ld, BlockTensor(il, bias));
      }
      CAIRN_LOAD_ASSIGN(L.ffn, LoadMlp(ld, il, hp.n_embd, hp.n_ff[il], FfnActivation::kReluSquared));
      continue;
    }
    L.mixer_norm = std::move(norm);
    if (hp.n_head_kv[il] == 0) {
      L.mixer = Mixer::kMamba;
      // The reference requires the grouped norm here (mamba2 has it optional).
      const MambaGeometry& g = m->mamba;
      CAIRN_RETURN_IF_ERROR(ld.Tensor(BlockTensor(il, "ssm_norm.weight"), {g.d_inner / g.n_group, g.n_group}).status());
      CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, m->mamba, il));
      continue;
    }
    L.attn = DecoderAttention(hp, il, 0.0);
    CAIRN_RETURN_IF_ERROR(
        LoadAttention(ld, il, hp.n_embd, {Presence::kOptional, Presence::kOptional, Presence::kAbsent}, L.attn));
  }

  m->FinishLoad(ld, HybridDims(hp, m->mamba.conv_state_floats(), m->mamba.ssm_state_floats()));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
