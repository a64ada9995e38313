// jamba (Jamba, Jamba Mini): Mamba-1 layers where head_count_kv[layer] is 0,
// attention layers elsewhere (no positional encoding at all, q.k scaled by
// 1/sqrt(head_dim)). The Mamba-1 mixers RMS-normalize dt, B and C with
// weights (ssm_{dt,b,c}_norm) before dt's projection and the scan. Every
// layer then has ffn_norm and an FFN: a mixture of experts where the layer
// has ffn_gate_inp (softmax over all experts, the expert_used_count best,
// weights neither renormalized nor scaled, SwiGLU experts), a dense SwiGLU
// elsewhere, both of width feed_forward_length.

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_stack.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadJamba(const ModelLoader& ld) {
  auto m = std::make_unique<HybridStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  std::vector<int32_t> attention_layers;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_head_kv[il] != 0) attention_layers.push_back(il);
  }
  if (static_cast<int32_t>(attention_layers.size()) == hp.n_layer) {
    return ld.Error("no Mamba layer (head_count_kv 0): serve this file with the transformer family");
  }
  int32_t n_head_kv = 1;  // without attention layers no K/V row is ever stored
  if (!attention_layers.empty()) CAIRN_LOAD_ASSIGN(n_head_kv, UniformKvHeads(ld, hp, attention_layers));
  if (hp.head_dim_k != hp.head_dim_v) return ld.Error("attention key_length and value_length must be one size");

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
    HybridStack::Layer& L = m->layers[il];
    if (hp.n_ff[il] <= 0) return ld.Error(absl::StrCat("layer ", il, ": feed_forward_length out of range"));
    CAIRN_LOAD_ASSIGN(L.attn_norm, ld.F32(BlockTensor(il, "attn_norm.weight"), {hp.n_embd}));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.F32(BlockTensor(il, "ffn_norm.weight"), {hp.n_embd}));
    // The reference decides per layer by the router's presence.
    if (ld.HasTensor(BlockTensor(il, "ffn_gate_inp.weight"))) {
      if (moe.n_expert == 0) return ld.Error(absl::StrCat("layer ", il, " has a router but expert_count is missing"));
      moe.n_ff = hp.n_ff[il];
      CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, hp.n_embd, moe));
    } else {
      CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, hp.n_embd, hp.n_ff[il], FfnActivation::kSilu));
    }
    if (hp.n_head_kv[il] == 0) {
      L.mixer = HybridStack::Mixer::kMamba;
      CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, m->mamba, il));
      continue;
    }
    L.attn = DecoderAttention(hp, n_head_kv, 0.0);
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, hp.n_embd, {Presence::kOptional, Presence::kAbsent, Presence::kAbsent},
                                        L.attn));
  }

  m->FinishLoad(ld, hp, n_head_kv, m->mamba.conv_state_floats(), m->mamba.ssm_state_floats());
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
