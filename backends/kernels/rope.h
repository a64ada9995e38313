// Rotary position embeddings, with the reference implementation's numerics
// (angles advance by repeated multiplication with base^(-2/n_dims) in F32).
#ifndef CAIRN_BACKENDS_KERNELS_ROPE_H_
#define CAIRN_BACKENDS_KERNELS_ROPE_H_

#include <cstdint>
#include <vector>

namespace cairn {

enum class RopeType {
  kNormal,  // rotates adjacent pairs (x[2i], x[2i+1]) (llama)
  kNeox,    // rotates (x[i], x[i + n_dims/2]) (qwen2, qwen3, gemma ...)
};

struct RopeParams {
  RopeType type = RopeType::kNormal;
  int32_t n_dims = 0;          // rotated dimensions per head (<= head dim); the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;     // linear scaling: 1 / rope.scaling.factor
  float attn_factor = 1.0f;    // multiplies cos and sin (mscale)
  // Optional per-pair divisors of the frequency (rope_freqs.weight, llama3),
  // n_dims / 2 entries; empty for none.
  std::vector<float> freq_factors;
};

// cos/sin for one position: cache[2*i] = cos(theta_i), cache[2*i+1] = sin(theta_i)
// for i < n_dims/2. `cache` must hold n_dims floats.
void RopeCache(const RopeParams& p, float pos, float* cache);

// Rotates `n_heads` heads of `head_dim` floats each (contiguous, in place)
// with a cache from RopeCache.
void RopeApply(const RopeParams& p, const float* cache, float* x, int32_t n_heads, int32_t head_dim);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ROPE_H_
