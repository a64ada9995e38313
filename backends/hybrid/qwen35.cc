// qwen35 (Qwen3.5): Gated DeltaNet layers, and gated attention every
// full_attention_interval-th layer (or where attention.recurrent_layers
// says 0) (attn_q rows [query | gate] per head, the
// output times sigmoid(gate)) with per-head q/k RMS norms and partial
// interleaved M-RoPE (IMROPE) over rope.dimension_sections; SwiGLU FFNs after
// post_attention_norm; MTP blocks (nextn_predict_layers) are not run. Takes
// multimodal embedding chunks, positioned by M-RoPE.

#include "backends/hybrid/hybrid_loading.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35(const ModelLoader& loader) {
  return LoadQwen35Style(loader, QwenHybridVariant{});
}

namespace {

// Which layers are Gated DeltaNet layers: attention.recurrent_layers (a
// per-layer array, nonzero: recurrent) or every layer but each
// full_attention_interval-th (default 4).
absl::StatusOr<std::vector<bool>> RecurrentLayers(const ModelLoader& ld, int32_t n_layer) {
  if (ld.HasKey("attention.recurrent_layers")) return ld.PerLayerFlags("attention.recurrent_layers", n_layer);
  std::vector<bool> recurrent(n_layer);
  int64_t interval = 0;
  CAIRN_LOAD_ASSIGN(interval, ld.IntInOr("full_attention_interval", 1, 4096, 4));
  for (int32_t il = 0; il < n_layer; ++il) recurrent[il] = (il + 1) % interval != 0;
  return recurrent;
}

// IMROPE rotates NEOX-style pairs by sections of (t, y, x, e).
absl::Status ReadImropeSections(const ModelLoader& ld, PositionEncoding& rope) {
  rope.imrope = true;
  std::vector<int64_t> sections;
  CAIRN_LOAD_ASSIGN(sections, ld.IntArray("rope.dimension_sections"));
  if (sections.empty() || sections.size() > 4) return ld.Error("rope.dimension_sections must have 1 to 4 entries");
  int64_t total = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0 || sections[i] > 4096) return ld.Error("bad rope section");
    rope.sections[i] = static_cast<int32_t>(sections[i]);
    total += sections[i];
  }
  if (total <= 0) return ld.Error("rope.dimension_sections are all zero");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadQwen35Style(const ModelLoader& ld, const QwenHybridVariant& variant) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  std::vector<bool> recurrent;
  CAIRN_LOAD_ASSIGN(recurrent, RecurrentLayers(ld, hp.n_layer));
  std::vector<int32_t> attention_layers;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (!recurrent[il]) attention_layers.push_back(il);
  }
  CAIRN_RETURN_IF_ERROR(CheckHybridHeads(ld, hp, attention_layers,
                                         hp.n_layer - static_cast<int32_t>(attention_layers.size()), HeadCountRule{}));
  const int32_t hd = hp.head_dim_k;

  // Partial NEOX RoPE, by sections of M-RoPE positions for qwen35.
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, RopeType::kNeox, hd));
  if (variant.imrope) CAIRN_RETURN_IF_ERROR(ReadImropeSections(ld, m->rope));

  m->eps = hp.eps;
  CAIRN_LOAD_ASSIGN(m->delta_net, ReadDeltaNetGeometry(ld, variant.delta_net));

  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, hp.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->layers.resize(hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    CAIRN_RETURN_IF_ERROR(LoadLayerNorms(ld, il, hp.n_embd, "post_attention_norm.weight", L));
    CAIRN_RETURN_IF_ERROR(LoadSwiGluOrMoe(ld, il, hp, variant.moe, L));
    if (recurrent[il]) {
      L.mixer = LayerStack::Mixer::kDeltaNet;
      CAIRN_LOAD_ASSIGN(L.delta_net, LoadDeltaNet(ld, m->delta_net, il));
      continue;
    }
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, 0.0);  // the reference reads no attention.scale here
    a.gated = true;
    a.rope = &m->rope;
    CAIRN_RETURN_IF_ERROR(
        LoadAttention(ld, il, hp.n_embd, {Presence::kAbsent, Presence::kAbsent, Presence::kRequired}, a));
  }

  m->accepts_embeddings = variant.imrope;
  m->FinishLoad(ld, HybridDims(hp, m->delta_net.conv_state_floats(), m->delta_net.state_floats()));
  return std::unique_ptr<ArchModel>(std::move(m));
}

}  // namespace cairn
