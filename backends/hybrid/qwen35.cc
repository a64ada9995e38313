// qwen35 (Qwen3.5): Gated DeltaNet layers, and gated attention every
// full_attention_interval-th layer (attn_q rows [query | gate] per head, the
// output times sigmoid(gate)) with per-head q/k RMS norms and partial
// interleaved M-RoPE (IMROPE) over rope.dimension_sections; SwiGLU FFNs after
// post_attention_norm; MTP blocks (nextn_predict_layers) are not run. Takes
// multimodal embedding chunks, positioned by M-RoPE.

#include "absl/strings/str_cat.h"
#include "backends/hybrid/hybrid_stack.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35(const ModelLoader& loader) {
  return LoadQwen35Style(loader, nullptr);
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35Style(const ModelLoader& ld, const MoeSpec* moe) {
  auto m = std::make_unique<HybridStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  int64_t interval = 0;
  CAIRN_LOAD_ASSIGN(interval, ld.IntInOr("full_attention_interval", 1, 4096, 4));
  std::vector<int32_t> attention_layers;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if ((il + 1) % interval == 0) attention_layers.push_back(il);
  }
  if (static_cast<int32_t>(attention_layers.size()) == hp.n_layer) {
    return ld.Error("no recurrent layer: serve this file with the transformer family");
  }
  int32_t n_head_kv = 1;  // without attention layers no K/V row is ever stored
  if (!attention_layers.empty()) CAIRN_LOAD_ASSIGN(n_head_kv, UniformKvHeads(ld, hp, attention_layers));
  if (hp.head_dim_k != hp.head_dim_v) return ld.Error("attention key_length and value_length must be one size");
  const int32_t hd = hp.head_dim_k;
  double attn_scale = 0;
  CAIRN_LOAD_ASSIGN(attn_scale, ld.FloatOr("attention.scale", 0.0));

  // IMROPE rotates NEOX-style pairs by sections of (t, y, x, e).
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hd));
  m->rope.imrope = true;
  std::vector<int64_t> sections;
  CAIRN_LOAD_ASSIGN(sections, ld.IntArray("rope.dimension_sections"));
  if (sections.empty() || sections.size() > 4) return ld.Error("rope.dimension_sections must have 1 to 4 entries");
  int64_t total = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0 || sections[i] > 4096) return ld.Error("bad rope section");
    m->rope.sections[i] = static_cast<int32_t>(sections[i]);
    total += sections[i];
  }
  if (total <= 0) return ld.Error("rope.dimension_sections are all zero");

  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->delta_net, ReadDeltaNetGeometry(ld));
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    HybridStack::Layer& L = m->layers[il];
    CAIRN_LOAD_ASSIGN(L.attn_norm, ld.F32(BlockTensor(il, "attn_norm.weight"), {hp.n_embd}));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.F32(BlockTensor(il, "post_attention_norm.weight"), {hp.n_embd}));
    if (moe != nullptr) {
      CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, hp.n_embd, *moe));
    } else {
      if (hp.n_ff[il] <= 0) return ld.Error(absl::StrCat("layer ", il, ": feed_forward_length out of range"));
      CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, hp.n_embd, hp.n_ff[il], FfnActivation::kSilu));
    }
    if ((il + 1) % interval != 0) {
      L.mixer = HybridStack::Mixer::kDeltaNet;
      CAIRN_LOAD_ASSIGN(L.delta_net, LoadDeltaNet(ld, m->delta_net, il));
      continue;
    }
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, n_head_kv, attn_scale);
    a.gated = true;
    a.rope = &m->rope;
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, hp.n_embd, {Presence::kAbsent, Presence::kAbsent, Presence::kRequired}, a));
  }

  m->accepts_embeddings = true;
  m->FinishLoad(ld, hp, n_head_kv, m->delta_net.conv_state_floats(), m->delta_net.state_floats());
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
