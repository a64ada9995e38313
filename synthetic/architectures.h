// One builder per architecture: a SyntheticModel (synthetic_model.h) with
// every metadata key and tensor that architecture's loader reads, of the
// shape given, with random weights drawn so that activations stay of order
// 1 through the layers: matrices uniform in +-1/sqrt(n_in), the token
// embedding in +-1, norms 1. The shapes' defaults are small (the built-in
// demo models'); benchmarks pass realistic ones. The weight type is the
// model's `weight_type`, which the caller may set before serializing.
//
// No tokenizer is written: the caller adds one to the metadata when it needs
// text (the demo models do).
#ifndef CAIRN_SYNTHETIC_ARCHITECTURES_H_
#define CAIRN_SYNTHETIC_ARCHITECTURES_H_

#include <array>
#include <cstdint>
#include <string>

#include "synthetic/synthetic_model.h"

namespace cairn::synthetic {

// llama: x += attn(RMSNorm(x)), x += SwiGLU(RMSNorm(x)), GQA. Also the
// tensors of qwen2 (arch "qwen2", qkv_bias) and qwen3 ("qwen3", qk_norm).
struct LlamaShape {
  std::string arch = "llama";
  int64_t n_embd = 64, n_ff = 192, n_vocab = 256;
  int32_t n_layer = 2, n_head = 4, n_head_kv = 2;
  uint32_t n_ctx = 4096;
  float rope_base = 10000.0f;
  float eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the token embedding serves
  bool qkv_bias = false;     // attn_{q,k,v}.bias, uniform in +-0.5
  bool qk_norm = false;      // attn_{q,k}_norm.weight per head
};
SyntheticModel Llama(const LlamaShape& shape);

// gemma3 (or gemma2 with arch "gemma2"): sandwich norms, GeGLU, q/k norms,
// local layers over a window, tied output.
struct GemmaShape {
  std::string arch = "gemma3";
  int64_t n_embd = 64, n_ff = 128, n_vocab = 256;
  int64_t n_layer = 4, n_head = 4, n_head_kv = 2, head_dim = 16;
  int64_t window = 8;
  int64_t pattern = 6;  // sliding_window_pattern; 0: not written (the loader's default)
  uint32_t n_ctx = 32768;
  float rope_base = 1e6f;
  float rope_base_swa = 1e4f;  // gemma3's rope.freq_base_swa; < 0: not written
  float eps = 1e-6f;
  bool qk_norm = true;
};
SyntheticModel Gemma(const GemmaShape& shape);

// mamba (Mamba-1): per-channel A, dt from a low-rank projection.
struct MambaShape {
  int64_t n_embd = 8, n_vocab = 16, d_inner = 16, d_state = 4, dt_rank = 2, d_conv = 3;
  int32_t n_layer = 2;
  uint32_t n_ctx = 1024;
  float eps = 1e-5f;
  bool dt_b_c_rms = false;  // mamba.ssm.dt_b_c_rms (FalconMamba)
};
SyntheticModel Mamba(const MambaShape& shape);

// mamba2: multi-head SSM, groups of B/C, grouped RMSNorm.
struct Mamba2Shape {
  int64_t n_embd = 64, n_vocab = 256, d_state = 16, n_head = 4, n_group = 1, d_conv = 4;
  int64_t d_inner = 0;  // 0: 2 * n_embd
  int64_t n_layer = 2;
  uint32_t n_ctx = 1 << 20;
  float eps = 1e-5f;
  int64_t inner() const { return d_inner > 0 ? d_inner : 2 * n_embd; }
  // The convolution's x | B | C channels, and the in-projection's z | xBC | dt.
  int64_t conv_channels() const { return inner() + 2 * n_group * d_state; }
  int64_t in_proj() const { return 2 * inner() + 2 * n_group * d_state + n_head; }
};
SyntheticModel Mamba2(const Mamba2Shape& shape);

// granitehybrid: Mamba-2 layers and one attention layer in every
// `attention_period` (layer l attends iff l % period == period - 1), no RoPE,
// SwiGLU FFNs; embedding, residual and logit scales; q.k scaled by 1/head_dim.
struct GraniteHybridShape {
  int64_t n_embd = 64, n_ff = 128, n_vocab = 256;
  int32_t n_layer = 4, n_head = 4, n_head_kv = 2, attention_period = 4;
  int64_t d_inner = 0;  // 0: 2 * n_embd
  int64_t d_state = 16, ssm_heads = 4, n_group = 1, d_conv = 4;
  uint32_t n_ctx = 8192;
  float eps = 1e-6f;
  float embedding_scale = 1.0f, residual_scale = 0.5f, logit_scale = 1.0f;
  bool tied_output = false;
  int64_t head_dim() const { return n_embd / n_head; }
  int64_t inner() const { return d_inner > 0 ? d_inner : 2 * n_embd; }
  int64_t conv_channels() const { return inner() + 2 * n_group * d_state; }
  int64_t in_proj() const { return 2 * inner() + 2 * n_group * d_state + ssm_heads; }
  bool attention(int32_t layer) const { return layer % attention_period == attention_period - 1; }
};
SyntheticModel GraniteHybrid(const GraniteHybridShape& shape);

// qwen35: Gated DeltaNet layers and gated attention every
// full_attention_interval-th layer (q/k norms, partial IMROPE), SwiGLU FFNs;
// with n_expert > 0 it is qwen35moe: a mixture of SwiGLU experts and a
// sigmoid-gated shared expert in every layer instead.
struct Qwen35Shape {
  int64_t n_embd = 64, n_vocab = 256;
  int64_t n_ff = 128;  // the dense FFN (without experts)
  int32_t n_layer = 4, n_head = 4, n_head_kv = 2, head_dim = 16, full_attention_interval = 2;
  int32_t rope_dims = 8;
  std::array<int32_t, 4> rope_sections = {2, 1, 1, 0};
  float rope_base = 1e7f;
  int64_t ssm_k_heads = 2, ssm_v_heads = 4, d_state = 16, d_conv = 4;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_ff_shared = 0;
  uint32_t n_ctx = 8192;
  float eps = 1e-6f;
  bool tied_output = false;
  bool attention(int32_t layer) const { return (layer + 1) % full_attention_interval == 0; }
  // The DeltaNet's q | k | v channels and its value width.
  int64_t conv_channels() const { return 2 * ssm_k_heads * d_state + value_dim(); }
  int64_t value_dim() const { return ssm_v_heads * d_state; }
};
SyntheticModel Qwen35(const Qwen35Shape& shape);

}  // namespace cairn::synthetic

#endif  // CAIRN_SYNTHETIC_ARCHITECTURES_H_
