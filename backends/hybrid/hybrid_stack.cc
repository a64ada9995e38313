#include "backends/hybrid/hybrid_stack.h"

#include "absl/strings/str_cat.h"
#include "backends/kernels/vec.h"

namespace cairn {
namespace {

size_t MixerBytes(const HybridStack::Layer& L) {
  switch (L.mixer) {
    case HybridStack::Mixer::kAttention:
      return L.attn.matrix_bytes();
    case HybridStack::Mixer::kMamba:
      return L.mamba.matrix_bytes();
    case HybridStack::Mixer::kDeltaNet:
      return L.delta_net.matrix_bytes();
    case HybridStack::Mixer::kShortConv:
      return L.short_conv.matrix_bytes();
    case HybridStack::Mixer::kAttentionAndMamba:
      return L.attn.matrix_bytes() + L.mamba.matrix_bytes();
    case HybridStack::Mixer::kNone:
      break;
  }
  return 0;
}

}  // namespace

absl::StatusOr<int32_t> ReadKvMarkedHybrid(const ModelLoader& ld, DecoderHParams& hp) {
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 4096));
  std::vector<int32_t> attention;
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_head_kv[il] != 0) attention.push_back(il);
  }
  return HybridKvHeads(ld, hp, attention, hp.n_layer - static_cast<int32_t>(attention.size()));
}

absl::Status LoadLayerNorms(const ModelLoader& ld, int32_t layer, int64_t n_embd, const char* ffn_norm,
                            HybridStack::Layer& L) {
  CAIRN_LOAD_ASSIGN(L.attn_norm, ld.F32(BlockTensor(layer, "attn_norm.weight"), {n_embd}));
  CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.F32(BlockTensor(layer, ffn_norm), {n_embd}));
  return absl::OkStatus();
}

absl::Status LoadSwiGluOrMoe(const ModelLoader& ld, int32_t layer, const DecoderHParams& hp, const MoeSpec* moe,
                             HybridStack::Layer& L) {
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

absl::StatusOr<int32_t> HybridKvHeads(const ModelLoader& ld, const DecoderHParams& hp,
                                      const std::vector<int32_t>& attention_layers, int32_t n_recurrent) {
  if (n_recurrent == 0) return ld.Error("no recurrent layer: serve this file with the transformer family");
  if (hp.head_dim_k != hp.head_dim_v) return ld.Error("attention key_length and value_length must be one size");
  if (attention_layers.empty()) return 1;  // no K/V row is ever stored
  return UniformKvHeads(ld, hp, attention_layers);
}

void HybridStack::FinishLoad(const ModelLoader& loader, const DecoderHParams& hp, int32_t n_head_kv,
                             int64_t conv_floats, int64_t state_floats) {
  SetVocabulary(loader, *tok_embd, hp.n_ctx_train);
  shape_.accepts_embeddings = accepts_embeddings;
  shape_.k_dim = static_cast<int64_t>(n_head_kv) * hp.head_dim_k;
  shape_.v_dim = static_cast<int64_t>(n_head_kv) * hp.head_dim_v;
  int32_t n_attention = 0, n_recurrent = 0;
  size_t bytes = head.output.bytes();
  for (Layer& L : layers) {
    const bool attention = L.mixer == Mixer::kAttention || L.mixer == Mixer::kAttentionAndMamba;
    const bool recurrent = L.mixer != Mixer::kAttention && L.mixer != Mixer::kNone;
    L.attn_slot = attention ? n_attention++ : -1;
    L.recurrent_slot = recurrent ? n_recurrent++ : -1;
    bytes += L.moe.n_expert > 0 ? L.moe.bytes_per_row() : L.ffn.matrix_bytes();
    bytes += MixerBytes(L);
  }
  shape_.weight_bytes = bytes;
  shape_.n_full_slots = n_attention;
  shape_.n_recurrent_slots = n_recurrent;
  shape_.conv_floats = conv_floats;
  shape_.state_floats = state_floats;
}

void HybridStack::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd, embedding_scale);
  float* out = pass.BlockOut();
  for (const Layer& L : layers) {
    if (L.mixer != Mixer::kNone) {
      const float* xn = pass.Normed(L.attn_norm, eps);
      switch (L.mixer) {
        case Mixer::kAttention:
          AttentionForward(L.attn, pass, L.attn_slot, xn, out);
          break;
        case Mixer::kMamba:
          MambaMixerForward(mamba, L.mamba, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), out,
                            pass.pool(), pass.precision(), pass.buffers());
          break;
        case Mixer::kDeltaNet:
          DeltaNetForward(delta_net, L.delta_net, eps, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), out,
                          pass.pool(), pass.precision());
          break;
        case Mixer::kShortConv:
          ShortConvForward(short_conv, L.short_conv, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), out,
                           pass.pool(), pass.precision(), pass.buffers());
          break;
        case Mixer::kAttentionAndMamba: {
          AttentionForward(L.attn, pass, L.attn_slot, xn, out);
          float* ssm =
              pass.buffers().Get(WorkBuffers::kParallelOut, static_cast<size_t>(pass.n_rows() * pass.width()));
          MambaMixerForward(mamba, L.mamba, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), ssm,
                            pass.pool(), pass.precision(), pass.buffers());
          // attn + ssm first, then the residual, in the reference's order.
          AddF32(out, ssm, out, pass.n_rows() * pass.width());
          break;
        }
        case Mixer::kNone:
          break;
      }
      pass.AddResidual(out, residual_scale);
    }
    if (!L.has_ffn()) continue;
    const float* fn = pass.Normed(L.ffn_norm, eps);
    if (L.moe.n_expert > 0) {
      MoeForward(L.moe, pass, fn, out);
    } else {
      FfnForward(L.ffn, pass, fn, out);
    }
    pass.AddResidual(out, residual_scale);
  }
  pass.Logits(head);
}

}  // namespace cairn
