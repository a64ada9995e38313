#include "backends/layers/layer_stack.h"

#include "backends/kernels/vec.h"

namespace cairn {
namespace {

using Layer = LayerStack::Layer;
using Mixer = LayerStack::Mixer;

bool HasAttention(const Layer& L) { return L.mixer == Mixer::kAttention || L.mixer == Mixer::kAttentionAndMamba; }
bool HasRecurrent(const Layer& L) { return L.mixer != Mixer::kAttention && L.mixer != Mixer::kNone; }

size_t MixerBytes(const Layer& L) {
  switch (L.mixer) {
    case Mixer::kAttention:
      return L.attn.matrix_bytes();
    case Mixer::kMamba:
      return L.mamba.matrix_bytes();
    case Mixer::kDeltaNet:
      return L.delta_net.matrix_bytes();
    case Mixer::kShortConv:
      return L.short_conv.matrix_bytes();
    case Mixer::kAttentionAndMamba:
      return L.attn.matrix_bytes() + L.mamba.matrix_bytes();
    case Mixer::kNone:
      break;
  }
  return 0;
}

// out = the layer's mixer of the normalized rows xn.
void MixerForward(const LayerStack& stack, const Layer& L, ForwardPass& pass, const float* xn, float* out,
                  QueryRows rows) {
  switch (L.mixer) {
    case Mixer::kAttention:
      AttentionForward(L.attn, pass, L.attn_slot, xn, out, rows);
      break;
    case Mixer::kMamba:
      MambaMixerForward(stack.mamba, L.mamba, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), out, pass.pool(),
                        pass.precision(), pass.buffers());
      break;
    case Mixer::kDeltaNet:
      DeltaNetForward(stack.delta_net, L.delta_net, stack.eps, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(),
                      out, pass.pool(), pass.precision(), pass.buffers());
      break;
    case Mixer::kShortConv:
      ShortConvForward(stack.short_conv, L.short_conv, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), out,
                       pass.pool(), pass.precision(), pass.buffers());
      break;
    case Mixer::kAttentionAndMamba: {
      AttentionForward(L.attn, pass, L.attn_slot, xn, out);
      float* ssm = pass.buffers().Get(WorkBuffers::kParallelOut, static_cast<size_t>(pass.n_rows() * pass.width()));
      MambaMixerForward(stack.mamba, L.mamba, pass.RecurrentRuns(L.recurrent_slot), xn, pass.n_rows(), ssm, pass.pool(),
                        pass.precision(), pass.buffers());
      // attn + ssm first, then the residual, in the reference's order.
      AddF32(out, ssm, out, pass.n_rows() * pass.width());
      break;
    }
    case Mixer::kNone:
      break;
  }
}

}  // namespace

void LayerStack::FinishLoad(const ModelLoader& loader, const MemoryDims& dims) {
  SetVocabulary(loader, *tok_embd, dims.n_ctx_train);
  shape_.accepts_embeddings = accepts_embeddings;
  shape_.window = dims.window;
  shape_.conv_floats = dims.conv_floats;
  shape_.state_floats = dims.state_floats;
  int32_t n_full = 0, n_windowed = 0, n_recurrent = 0;
  for (const Layer& L : layers) {
    if (HasAttention(L)) (L.attn.window > 0 ? n_windowed : n_full) += 1;
  }
  // Full attention slots first, then the rings (SwaMemory's order).
  int32_t next_full = 0, next_windowed = n_full;
  size_t bytes = head.output.bytes();
  for (Layer& L : layers) {
    L.attn_slot = !HasAttention(L) ? -1 : L.attn.window > 0 ? next_windowed++ : next_full++;
    L.recurrent_slot = HasRecurrent(L) ? n_recurrent++ : -1;
    bytes += L.moe.n_expert > 0 ? L.moe.bytes_per_row() : L.ffn.matrix_bytes();
    bytes += MixerBytes(L);
  }
  shape_.kv_widths.assign(static_cast<size_t>(n_full + n_windowed), KvWidth{});
  for (const Layer& L : layers) {
    if (L.attn_slot >= 0) shape_.kv_widths[L.attn_slot] = KvWidth{L.attn.k_dim(), L.attn.v_dim()};
  }
  shape_.weight_bytes = bytes;
  shape_.n_full_slots = n_full;
  shape_.n_window_slots = n_windowed;
  shape_.n_recurrent_slots = n_recurrent;
}

void LayerStack::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd, embedding_scale);
  float* out = pass.BlockOut();
  for (size_t il = 0; il < layers.size(); ++il) {
    const Layer& L = layers[il];
    if (L.mixer != Mixer::kNone) {
      const bool wanted_only = wanted_rows_after_last_attention && il + 1 == layers.size();
      MixerForward(*this, L, pass, pass.Normed(L.mixer_norm, eps), out,
                   wanted_only ? QueryRows::kWanted : QueryRows::kAll);
      if (wanted_only) pass.KeepWantedRows();
      if (!L.post_mixer_norm.empty()) pass.NormInPlace(out, L.post_mixer_norm, eps);
      pass.AddResidual(out, residual_scale);
    }
    if (!L.has_ffn()) continue;
    const float* fn = pass.Normed(L.ffn_norm, eps);
    if (L.moe.n_expert > 0) {
      MoeForward(L.moe, pass, fn, out);
    } else {
      FfnForward(L.ffn, pass, fn, out);
    }
    if (!L.post_ffn_norm.empty()) pass.NormInPlace(out, L.post_ffn_norm, eps);
    pass.AddResidual(out, residual_scale);
  }
  pass.Logits(head);
}

}  // namespace cairn
