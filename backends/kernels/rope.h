// Rotary position embeddings, with the reference implementation's numerics
// (angles advance by repeated multiplication with base^(-2/n_dims) in F32),
// optionally YaRN-scaled (gpt-oss).
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
  int32_t n_dims = 0;  // rotated dimensions per head (<= head dim); the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // linear scaling: 1 / rope.scaling.factor
  float attn_factor = 1.0f;  // multiplies cos and sin (mscale)
  // YaRN (ext_factor != 0): pair i's angle blends the interpolated
  // (freq_scale * theta) and the extrapolated (theta) angle by
  // ramp_i * ext_factor, where ramp_i falls from 1 to 0 between the
  // correction dims of RopeYarnCorrDims(n_dims, yarn_orig_ctx, freq_base,
  // beta_fast, beta_slow); cos and sin are further multiplied by
  // 1 + 0.1 ln(1 / freq_scale).
  float ext_factor = 0.0f;
  int32_t yarn_orig_ctx = 0;  // the context length the model was trained at
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  // Optional per-pair divisors of the frequency (rope_freqs.weight, llama3),
  // n_dims / 2 entries; empty for none.
  std::vector<float> freq_factors;
};

// YaRN's correction dims: the pairs below dims[0] keep their extrapolated
// angle, those above dims[1] the interpolated one (floor and ceil of the
// dimensions whose wavelength makes beta_fast / beta_slow turns over
// n_ctx_orig positions, clamped to [0, n_dims - 1]).
void RopeYarnCorrDims(int32_t n_dims, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]);

// cos/sin for one position: cache[2*i] = cos(theta_i), cache[2*i+1] = sin(theta_i)
// for i < n_dims/2. `cache` must hold n_dims floats.
void RopeCache(const RopeParams& p, float pos, float* cache);

// Interleaved multi-section RoPE (IMROPE, Qwen3-VL / Qwen3.5): each rotated
// pair i takes its angle from one of four position components (t, h, w, e)
// by sector s = i % (sum of sections): s % 3 == 0 and s < 3 * sections[0]
// -> t, s % 3 == 1 and s < 3 * sections[1] -> h, s % 3 == 2 and
// s < 3 * sections[2] -> w, otherwise e. Each component's angle advances by
// the same repeated multiplication as RopeCache, so a text position
// (p, p, p, 0) whose sectors never select e rotates exactly like RopeCache(p).
// Pairing is NEOX-style (apply with RopeApply and RopeType::kNeox).
// `pos` holds the four components; `cache` as for RopeCache.
void RopeCacheImrope(const RopeParams& p, const int32_t sections[4], const float pos[4], float* cache);

// Rotates `n_heads` heads of `head_dim` floats each (contiguous, in place)
// with a cache from RopeCache.
void RopeApply(const RopeParams& p, const float* cache, float* x, int32_t n_heads, int32_t head_dim);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ROPE_H_
