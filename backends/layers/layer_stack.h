// The forward pass of every architecture: an architecture's wiring file
// (backends/<family>/<arch>.cc) is a loader that reads its hyperparameters
// and tensors into a LayerStack, saying which blocks each layer holds, and
// the stack runs it (backends/README.md: the wiring style, and why).
//
//   x = Embed(tokens or embedding rows) * embedding_scale
//   per layer, each half skipped where the layer has none:
//     x += residual_scale * PostNorm(mixer(RMSNorm(x, mixer_norm)), post_mixer_norm)
//     x += residual_scale * PostNorm(ffn(RMSNorm(x, ffn_norm)), post_ffn_norm)
//   the wanted rows' logits (OutputHead)
//
// The mixer is attention, a recurrent mixer (Mamba-1/2 as `mamba` says,
// Gated DeltaNet, a short convolution) or attention and Mamba side by side
// on the same input, their outputs summed (falcon-h1); the FFN is a dense
// FFN (GLU or MLP) or a mixture of experts; a post norm is applied where its
// weight is set (gemma's sandwich norms).
//
// Contract: a loader fills the public fields, then calls FinishLoad once,
// which numbers the memory slots and sets the shape. The stack keeps
// pointers into the ModelFile (which must outlive it), and its attention
// blocks point at its own PositionEncodings, so it is never copied. Forward
// follows ArchModel's contract (serialized by the backend).
#ifndef CAIRN_BACKENDS_LAYERS_LAYER_STACK_H_
#define CAIRN_BACKENDS_LAYERS_LAYER_STACK_H_

#include <cstdint>
#include <vector>

#include "backends/layers/arch_model.h"
#include "backends/layers/attention.h"
#include "backends/layers/delta_net_mixer.h"
#include "backends/layers/ffn.h"
#include "backends/layers/mamba_mixer.h"
#include "backends/layers/moe.h"
#include "backends/layers/short_conv_mixer.h"

namespace cairn {

class LayerStack final : public ArchModel {
 public:
  enum class Mixer {
    kAttention,
    kMamba,  // Mamba-1 or Mamba-2, as `mamba` says
    kDeltaNet,
    kShortConv,          // a conv state, no recurrent state
    kAttentionAndMamba,  // attn(n) + mamba(n): one attention and one recurrent slot
    kNone,               // no mixer half: the layer is its FFN alone
  };
  struct Layer {
    Mixer mixer = Mixer::kAttention;
    // Numbered by FinishLoad; -1 where the layer has none.
    int32_t attn_slot = -1;
    int32_t recurrent_slot = -1;
    std::vector<float> mixer_norm, ffn_norm;            // RMSNorm weights [n_embd]
    std::vector<float> post_mixer_norm, post_ffn_norm;  // empty: none
    AttentionBlock attn;
    MambaMixerWeights mamba;
    DeltaNetWeights delta_net;
    ShortConvWeights short_conv;
    FfnBlock ffn;  // the dense FFN, unless moe.n_expert > 0; neither: no FFN half
    MoeBlock moe;

    bool has_ffn() const { return moe.n_expert > 0 || ffn.n_ff > 0; }
  };

  float eps = 1e-5f;  // of every RMSNorm of the layers
  float embedding_scale = 1.0f;
  float residual_scale = 1.0f;
  // The last layer, past its attention mixer, works on the wanted rows alone
  // (their K/V rows are stored for all): the rest of it serves only the
  // logits. Only where the last layer's mixer is attention.
  bool wanted_rows_after_last_attention = false;
  bool accepts_embeddings = false;  // embedding chunks (M-RoPE)
  // The encodings attention blocks point at: global (or only) and local layers'.
  PositionEncoding rope, rope_local;
  MambaGeometry mamba;
  DeltaNetGeometry delta_net;
  ShortConvGeometry short_conv;
  const TensorInfo* tok_embd = nullptr;
  OutputHead head;
  std::vector<Layer> layers;

  // What the shape takes besides the layers.
  struct MemoryDims {
    int32_t n_ctx_train = 0;
    int32_t window = 0;       // of the windowed attention layers (attn.window > 0)
    int64_t conv_floats = 0;  // per recurrent slot
    int64_t state_floats = 0;
  };
  // Numbers the slots (full attention first, then windowed attention, each in
  // layer order; recurrent slots in layer order) and sets the shape:
  // vocabulary, weight bytes read per token, slot counts and each attention
  // slot's K/V widths (its block's), `dims`.
  void FinishLoad(const ModelLoader& loader, const MemoryDims& dims);

  void Forward(ForwardPass& pass) const override;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_LAYER_STACK_H_
