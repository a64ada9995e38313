#include "backends/hybrid/hybrid_stack.h"

namespace cairn {

void HybridStack::FinishLoad(const ModelLoader& loader, const DecoderHParams& hp, int32_t n_head_kv,
                             int64_t conv_floats, int64_t state_floats) {
  SetVocabulary(loader, *tok_embd, hp.n_ctx_train);
  shape_.accepts_embeddings = accepts_embeddings;
  shape_.k_dim = static_cast<int64_t>(n_head_kv) * hp.head_dim_k;
  shape_.v_dim = static_cast<int64_t>(n_head_kv) * hp.head_dim_v;
  int32_t n_attention = 0, n_recurrent = 0;
  size_t bytes = head.output.bytes();
  for (Layer& L : layers) {
    bytes += L.moe.n_expert > 0 ? L.moe.bytes_per_row() : L.ffn.matrix_bytes();
    switch (L.mixer) {
      case Mixer::kAttention:
        L.slot = n_attention++;
        bytes += L.attn.matrix_bytes();
        break;
      case Mixer::kMamba:
        L.slot = n_recurrent++;
        bytes += L.mamba.matrix_bytes();
        break;
      case Mixer::kDeltaNet:
        L.slot = n_recurrent++;
        bytes += L.delta_net.matrix_bytes();
        break;
      case Mixer::kShortConv:
        L.slot = n_recurrent++;
        bytes += L.short_conv.matrix_bytes();
        break;
      case Mixer::kNone:
        L.slot = -1;
        break;
    }
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
          AttentionForward(L.attn, pass, L.slot, xn, out);
          break;
        case Mixer::kMamba:
          MambaMixerForward(mamba, L.mamba, pass.RecurrentRuns(L.slot), xn, pass.n_rows(), out, pass.pool(),
                            pass.buffers());
          break;
        case Mixer::kDeltaNet:
          DeltaNetForward(delta_net, L.delta_net, eps, pass.RecurrentRuns(L.slot), xn, pass.n_rows(), out,
                          pass.pool());
          break;
        case Mixer::kShortConv:
          ShortConvForward(short_conv, L.short_conv, pass.RecurrentRuns(L.slot), xn, pass.n_rows(), out,
                           pass.pool(), pass.buffers());
          break;
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
