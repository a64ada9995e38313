// Selective state-space scans (Mamba-1 and Mamba-2) in their exact
// sequential form, plus the grouped RMSNorm of Mamba-2's output. (The output
// gate y * silu(z) is SwiGlu(z, y) from activation.h.)
//
// The sequential form is the reference: each token updates the state once,
// in order, so a sequence split into runs of any length (prompt in one batch,
// token by token, or restored from a snapshot midway) produces bit-identical
// states and outputs. All kernels are single-threaded over the slice they are
// given; callers split heads or channels between threads.
#ifndef CAIRN_BACKENDS_KERNELS_SSM_H_
#define CAIRN_BACKENDS_KERNELS_SSM_H_

#include <cmath>
#include <cstdint>
#include <vector>

namespace cairn {

// log(1 + e^x), returning x itself above 20 where the two agree in F32
// (and exp would overflow soon after): the threshold the reference uses.
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Mamba-2 scan over one sequence's run of tokens, for heads [head_begin,
// head_end). Per token t, head h (group g = h / (n_head / n_group), as
// repeat_interleave assigns them), head-dim index i and state index n:
//   dt'   = softplus(dt[t][h] + dt_bias[h])
//   S[h][n][i] = S[h][n][i] * exp(dt' * A[h]) + B[t][g][n] * (x[t][h][i] * dt')
//   y[t][h][i] = sum_n S[h][n][i] * C[t][g][n]   (n ascending)  + x[t][h][i] * D[h]
//
// Layouts (F32; rows strided so that slices of the in-projection can be
// passed directly):
//   x:  row t at x + t * x_stride, n_head * head_dim values (head-major)
//   dt: row t at dt + t * dt_stride, n_head raw values (before bias/softplus)
//   B, C: rows at B + t * bc_stride / C + t * bc_stride, n_group * d_state values
//   dt_bias, A, D: n_head values each; D may be null (no skip)
//   state: [n_head][d_state][head_dim], updated in place. This layout (head
//          dim innermost) makes the inner loop a plain vector update with no
//          reduction, and is the snapshot format of the recurrent memory.
//   y:  row t at y + t * y_stride; must not overlap the inputs or the state.
struct Mamba2ScanArgs {
  int64_t n_tokens = 0;
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_group = 0;
  int64_t d_state = 0;
  int64_t head_begin = 0;
  int64_t head_end = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  const float* dt = nullptr;
  int64_t dt_stride = 0;
  const float* B = nullptr;
  const float* C = nullptr;
  int64_t bc_stride = 0;
  const float* dt_bias = nullptr;
  const float* A = nullptr;
  const float* D = nullptr;
  float* state = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};
void Mamba2Scan(const Mamba2ScanArgs& args);

// Mamba-1 selective scan over one sequence's run, for channels
// [channel_begin, channel_end) of d_inner. Per token t, channel c, state n:
//   dt'   = softplus(dt[t][c])          (dt already projected and biased)
//   S[n][c] = S[n][c] * exp(dt' * A[c][n]) + B[t][n] * (x[t][c] * dt')
//   y[t][c] = sum_n S[n][c] * C[t][n]   (n ascending)  + x[t][c] * D[c]
//
// Layouts:
//   x, dt: rows strided by x_stride / dt_stride, d_inner values
//   B, C:  rows strided by bc_stride, d_state values each
//   A_t:   [d_state][d_inner]: the transpose of GGUF's ssm_a ([d_state,
//          d_inner], d_state innermost), so the inner loop runs over channels
//   D:     d_inner values, or null
//   state: [d_state][d_inner], updated in place
//   y:     rows strided by y_stride; must not overlap the inputs or the state
struct Mamba1ScanArgs {
  int64_t n_tokens = 0;
  int64_t d_inner = 0;
  int64_t d_state = 0;
  int64_t channel_begin = 0;
  int64_t channel_end = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  const float* dt = nullptr;
  int64_t dt_stride = 0;
  const float* B = nullptr;
  const float* C = nullptr;
  int64_t bc_stride = 0;
  const float* A_t = nullptr;
  const float* D = nullptr;
  float* state = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};
void Mamba1Scan(const Mamba1ScanArgs& args);

// Returns [d_state][d_inner] from GGUF's ssm_a laid out [d_inner][d_state].
std::vector<float> TransposeMamba1A(const float* gguf_a, int64_t d_inner, int64_t d_state);

// RMSNorm of `n_groups` consecutive groups of `group_size` values each, each
// group scaled by its own slice of `weight` ([n_groups * group_size]):
//   out[i] = x[i] / sqrt(mean_{group of i}(x^2) + eps) * weight[i]
// weight may be null (no scale); out may equal x. (RmsNormRows shares one
// weight row between rows, which is not what Mamba-2's norm does.)
void GroupRmsNorm(const float* x, int64_t n_groups, int64_t group_size, const float* weight, float eps, float* out);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_SSM_H_
