// The hybrid family: models whose layers mix attention and recurrent mixers,
// with one composite memory per sequence (HybridMemory: a full K/V cache per
// attention mixer, a state per recurrent mixer), so
// nothing is cut back without a snapshot, which the backend can take inside a
// run. Architectures (wiring files loading a LayerStack, with the load steps
// of hybrid_loading.h):
//   granitehybrid  Mamba-2 layers where head_count_kv[layer] == 0, attention
//                  layers elsewhere (no positional encoding unless
//                  rope.scaling.finetuned); embedding, residual, attention
//                  and logit scales.
//   qwen35         Gated DeltaNet layers and gated attention layers (every
//                  full_attention_interval-th layer), q/k norms, partial
//                  IMROPE over rope.dimension_sections, post-attention norm;
//                  MTP blocks (nextn_predict_layers) are not run. Accepts
//                  multimodal embedding chunks with M-RoPE positions.
//   qwen35moe      qwen35 with a mixture of experts (and a gated shared
//                  expert) in every layer.
//   qwen3next      qwen35moe's stack with partial NEOX RoPE over plain
//                  positions and the Qwen3-Next DeltaNet layout (fused
//                  ssm_ba; value head h reads key head h / ratio).
//   falcon-h1      attention and Mamba-2 side by side in every layer, their
//                  outputs summed, then a SwiGLU FFN: each layer owns a K/V
//                  slot and a state.
//   jamba          Mamba-1 layers (RMS norms of dt, B, C with weights) where
//                  head_count_kv[layer] == 0, attention layers (no positional
//                  encoding) elsewhere; a dense or MoE SwiGLU FFN per layer.
//   nemotron_h,    one block per layer: Mamba-2, attention (no positional
//   nemotron_h_moe encoding) or a squared-ReLU MLP / MoE (sigmoid router with
//                  selection bias, ungated shared expert), by the per-layer
//                  head_count_kv and feed_forward_length.
//   lfm2           gated short-convolution layers (a conv state only) where
//                  head_count_kv[layer] == 0, attention layers (q/k norms,
//                  NEOX RoPE) elsewhere; SwiGLU FFNs.
// Activations, K/V rows and recurrent states are F32; weights may be any type
// the model reader dequantizes.
#ifndef CAIRN_BACKENDS_HYBRID_HYBRID_BACKEND_H_
#define CAIRN_BACKENDS_HYBRID_HYBRID_BACKEND_H_

#include "backends/backend.h"

namespace cairn {

// Name "hybrid". Its factory's errors: INVALID_ARGUMENT for another
// architecture or missing/inconsistent metadata and tensors (the message
// names them), NOT_FOUND for a missing tensor, UNIMPLEMENTED for attention
// layers of different K/V widths and the variants the wiring files name
// (older qwen3next files with one ssm_in for q, k, v and z, falcon-h1's FFN
// biases, nemotron_h's MLP biases and latent MoE, lfm2's sliding-window
// attention).
BackendFamily HybridFamily();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_HYBRID_HYBRID_BACKEND_H_
