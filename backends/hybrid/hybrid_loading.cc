#include "backends/hybrid/hybrid_loading.h"

#include "absl/strings/str_cat.h"

namespace cairn {

absl::Status ReadKvMarkedHybrid(const ModelLoader& ld, HeadCountRule rule, DecoderHParams& hp) {
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  std::vector<int32_t> attention;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_head_kv[il] != 0) attention.push_back(il);
  }
  return CheckHybridHeads(ld, hp, attention, hp.n_layer - static_cast<int32_t>(attention.size()), rule);
}

absl::Status LoadLayerNorms(const ModelLoader& ld, int32_t layer, int64_t n_embd, const char* ffn_norm,
                            LayerStack::Layer& L) {
  CAIRN_LOAD_ASSIGN(L.mixer_norm, ld.F32(BlockTensor(layer, "attn_norm.weight"), {n_embd}));
  CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.F32(BlockTensor(layer, ffn_norm), {n_embd}));
  return absl::OkStatus();
}

absl::Status LoadSwiGluOrMoe(const ModelLoader& ld, int32_t layer, const DecoderHParams& hp, const MoeSpec* moe,
                             LayerStack::Layer& L) {
  if (moe != nullptr && moe->n_ff > 0) {
    CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, layer, hp.n_embd, *moe));
    return absl::OkStatus();
  }
  const int64_t n_ff = hp.n_ff[layer];
  if (n_ff <= 0) return ld.Error(absl::StrCat("layer ", layer, ": feed_forward_length out of range"));
  if (moe == nullptr) {
    CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, layer, hp.n_embd, n_ff, FfnActivation::kSilu));
    return absl::OkStatus();
  }
  MoeSpec spec = *moe;
  spec.n_ff = n_ff;
  CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, layer, hp.n_embd, spec));
  return absl::OkStatus();
}

absl::Status CheckHybridHeads(const ModelLoader& ld, const DecoderHParams& hp,
                              const std::vector<int32_t>& attention_layers, int32_t n_recurrent, HeadCountRule rule) {
  if (n_recurrent == 0) return ld.Error("no recurrent layer: serve this file with the transformer family");
  if (hp.head_dim_k != hp.head_dim_v) return ld.Error("attention key_length and value_length must be one size");
  if (attention_layers.empty()) return absl::OkStatus();
  return CheckHeadCounts(ld, hp, rule, attention_layers);
}

LayerStack::MemoryDims HybridDims(const DecoderHParams& hp, int64_t conv_floats, int64_t state_floats) {
  LayerStack::MemoryDims dims;
  dims.n_ctx_train = hp.n_ctx_train;
  dims.conv_floats = conv_floats;
  dims.state_floats = state_floats;
  return dims;
}

}  // namespace cairn
