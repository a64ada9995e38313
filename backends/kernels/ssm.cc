#include "backends/kernels/ssm.h"

#include <cmath>
#include <vector>

#include "backends/kernels/norm.h"

namespace cairn {

namespace {

// 16 floats: one AVX-512 register (GCC splits it on narrower targets).
// aligned(4) makes dereferencing a V* an unaligned load/store.
typedef float V16 __attribute__((vector_size(64), aligned(4)));
constexpr int64_t kLanes = 16;   // head-dim elements per tile
constexpr int64_t kStates = 16;  // state elements held in registers per tile

// dt' and exp(dt' A) of every token of the run for head h.
void HeadDecay(const Mamba2ScanArgs& a, int64_t h, float* dts, float* dAs) {
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    dts[t] = Softplus(a.dt[t * a.dt_stride + h] + a.dt_bias[h]);
    dAs[t] = std::exp(dts[t] * a.A[h]);
  }
}

// One head, any geometry: token by token over the whole head state.
void Mamba2HeadGeneric(const Mamba2ScanArgs& a, int64_t h, const float* dts, const float* dAs, float* xdt, float* acc) {
  const int64_t hd = a.head_dim;
  const int64_t ds = a.d_state;
  const int64_t g = h / (a.n_head / a.n_group);
  float* __restrict s_head = a.state + h * ds * hd;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* __restrict x = a.x + t * a.x_stride + h * hd;
    const float* __restrict B = a.B + t * a.bc_stride + g * ds;
    const float* __restrict C = a.C + t * a.bc_stride + g * ds;
    const float dt = dts[t];
    const float dA = dAs[t];
    for (int64_t i = 0; i < hd; ++i) {
      xdt[i] = x[i] * dt;
      acc[i] = 0.0f;
    }
    for (int64_t n = 0; n < ds; ++n) {
      const float b = B[n];
      const float c = C[n];
      float* __restrict s = s_head + n * hd;
      for (int64_t i = 0; i < hd; ++i) {
        const float v = s[i] * dA + b * xdt[i];
        s[i] = v;
        acc[i] += v * c;
      }
    }
    float* __restrict y = a.y + t * a.y_stride + h * hd;
    for (int64_t i = 0; i < hd; ++i) y[i] = acc[i];
  }
}

// One head with head_dim and d_state multiples of 16. A tile of 16 state
// rows x 16 head-dim lanes stays in registers across all tokens of the run
// (the generic form streams the whole 64 KiB head state per token), and the
// output sums live in y between tiles. Each state element and each output
// sum sees exactly the operations of the generic form in the same order
// (tokens in order; states n ascending from 0), so results are bit-identical.
void Mamba2HeadTiled(const Mamba2ScanArgs& a, int64_t h, const float* dts, const float* dAs) {
  const int64_t hd = a.head_dim;
  const int64_t ds = a.d_state;
  const int64_t g = h / (a.n_head / a.n_group);
  float* s_head = a.state + h * ds * hd;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    float* y = a.y + t * a.y_stride + h * hd;
    for (int64_t i = 0; i < hd; ++i) y[i] = 0.0f;
  }
  for (int64_t i0 = 0; i0 < hd; i0 += kLanes) {
    for (int64_t n0 = 0; n0 < ds; n0 += kStates) {
      V16 s[kStates];
      for (int64_t k = 0; k < kStates; ++k) s[k] = *reinterpret_cast<const V16*>(s_head + (n0 + k) * hd + i0);
      for (int64_t t = 0; t < a.n_tokens; ++t) {
        const float* B = a.B + t * a.bc_stride + g * ds + n0;
        const float* C = a.C + t * a.bc_stride + g * ds + n0;
        const V16 xdt = *reinterpret_cast<const V16*>(a.x + t * a.x_stride + h * hd + i0) * dts[t];
        const float dA = dAs[t];
        V16* y = reinterpret_cast<V16*>(a.y + t * a.y_stride + h * hd + i0);
        V16 acc = *y;
        for (int64_t k = 0; k < kStates; ++k) {
          s[k] = s[k] * dA + B[k] * xdt;
          acc += s[k] * C[k];
        }
        *y = acc;
      }
      for (int64_t k = 0; k < kStates; ++k) *reinterpret_cast<V16*>(s_head + (n0 + k) * hd + i0) = s[k];
    }
  }
}

}  // namespace

void Mamba2Scan(const Mamba2ScanArgs& a) {
  const int64_t hd = a.head_dim;
  const bool tiled = hd % kLanes == 0 && a.d_state % kStates == 0;
  // Per-call scratch: dt' and decay per token; x * dt' and sums per lane.
  std::vector<float> scratch(static_cast<size_t>(2 * a.n_tokens + 2 * hd));
  float* dts = scratch.data();
  float* dAs = dts + a.n_tokens;
  float* xdt = dAs + a.n_tokens;
  float* acc = xdt + hd;
  for (int64_t h = a.head_begin; h < a.head_end; ++h) {
    HeadDecay(a, h, dts, dAs);
    if (tiled) {
      Mamba2HeadTiled(a, h, dts, dAs);
    } else {
      Mamba2HeadGeneric(a, h, dts, dAs, xdt, acc);
    }
    // The D skip, added after the full sum as the reference does.
    if (a.D != nullptr) {
      const float D = a.D[h];
      for (int64_t t = 0; t < a.n_tokens; ++t) {
        const float* __restrict x = a.x + t * a.x_stride + h * hd;
        float* __restrict y = a.y + t * a.y_stride + h * hd;
        for (int64_t i = 0; i < hd; ++i) y[i] = y[i] + x[i] * D;
      }
    }
  }
}

void Mamba1Scan(const Mamba1ScanArgs& a) {
  const int64_t c0 = a.channel_begin;
  const int64_t nc = a.channel_end - a.channel_begin;
  if (nc <= 0) return;
  std::vector<float> scratch(static_cast<size_t>(3 * nc));
  float* __restrict dts = scratch.data();
  float* __restrict xdt = scratch.data() + nc;
  float* __restrict acc = scratch.data() + 2 * nc;

  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* __restrict x = a.x + t * a.x_stride + c0;
    const float* __restrict dt = a.dt + t * a.dt_stride + c0;
    const float* __restrict B = a.B + t * a.bc_stride;
    const float* __restrict C = a.C + t * a.bc_stride;
    for (int64_t c = 0; c < nc; ++c) {
      dts[c] = Softplus(dt[c]);
      xdt[c] = x[c] * dts[c];
      acc[c] = 0.0f;
    }
    for (int64_t n = 0; n < a.d_state; ++n) {
      const float b = B[n];
      const float cn = C[n];
      float* __restrict s = a.state + n * a.d_inner + c0;
      const float* __restrict A = a.A_t + n * a.d_inner + c0;
      for (int64_t c = 0; c < nc; ++c) {
        const float v = s[c] * std::exp(dts[c] * A[c]) + b * xdt[c];
        s[c] = v;
        acc[c] += v * cn;
      }
    }
    float* __restrict y = a.y + t * a.y_stride + c0;
    if (a.D != nullptr) {
      const float* __restrict D = a.D + c0;
      for (int64_t c = 0; c < nc; ++c) y[c] = acc[c] + x[c] * D[c];
    } else {
      for (int64_t c = 0; c < nc; ++c) y[c] = acc[c];
    }
  }
}

std::vector<float> TransposeMamba1A(const float* gguf_a, int64_t d_inner, int64_t d_state) {
  std::vector<float> out(static_cast<size_t>(d_inner * d_state));
  for (int64_t c = 0; c < d_inner; ++c) {
    for (int64_t n = 0; n < d_state; ++n) out[n * d_inner + c] = gguf_a[c * d_state + n];
  }
  return out;
}

void GroupRmsNorm(const float* x, int64_t n_groups, int64_t group_size, const float* weight, float eps, float* out) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t o = g * group_size;
    RmsNorm(x + o, weight != nullptr ? weight + o : nullptr, group_size, eps, out + o);
  }
}

}  // namespace cairn
