#include "backends/layers/delta_net_mixer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/kernels/activation.h"
#include "backends/kernels/conv1d.h"
#include "backends/kernels/delta_net.h"
#include "backends/kernels/norm.h"
#include "backends/kernels/ssm.h"
#include "backends/layers/model_loading.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

absl::StatusOr<DeltaNetGeometry> ReadDeltaNetGeometry(const ModelLoader& ld, DeltaNetVariant variant) {
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  DeltaNetGeometry g;
  g.variant = variant;
  int64_t d_inner = 0;
  CAIRN_LOAD_ASSIGN(g.n_embd, ld.IntIn("embedding_length", 1, kMaxDim));
  CAIRN_LOAD_ASSIGN(g.d_conv, ld.IntIn("ssm.conv_kernel", 1, 64));
  CAIRN_LOAD_ASSIGN(g.n_head_k, ld.IntIn("ssm.group_count", 1, 4096));
  CAIRN_LOAD_ASSIGN(g.n_head_v, ld.IntIn("ssm.time_step_rank", 1, 4096));
  CAIRN_LOAD_ASSIGN(g.d_k, ld.IntIn("ssm.state_size", 1, 4096));
  CAIRN_LOAD_ASSIGN(d_inner, ld.IntIn("ssm.inner_size", 1, kMaxDim));
  if (d_inner % g.n_head_v != 0 || g.n_head_v % g.n_head_k != 0) {
    return ld.Error(absl::StrCat("ssm.inner_size ", d_inner, ", value heads (ssm.time_step_rank) ", g.n_head_v,
                                 " and key heads (ssm.group_count) ", g.n_head_k,
                                 " must nest (key heads | value heads | inner size)"));
  }
  g.d_v = d_inner / g.n_head_v;
  return g;
}

size_t DeltaNetWeights::matrix_bytes() const {
  return qkv.bytes() + z.bytes() + beta.bytes() + alpha.bytes() + ba.bytes() + out.bytes();
}

absl::StatusOr<DeltaNetWeights> LoadDeltaNet(const ModelLoader& ld, const DeltaNetGeometry& g, int layer) {
  auto name = [layer](const char* n) { return BlockTensor(layer, n); };
  const int64_t E = g.n_embd, C = g.conv_channels();
  DeltaNetWeights w;
  if (g.variant == DeltaNetVariant::kQwen3Next && !ld.HasTensor(name("attn_qkv.weight")) &&
      ld.HasTensor(name("ssm_in.weight"))) {
    return absl::UnimplementedError(absl::StrCat("model '", ld.file().path(), "': ", name("ssm_in.weight"),
                                                 ": the fused q/k/v/z projection of older qwen3next files is not "
                                                 "supported (convert again: attn_qkv and attn_gate)"));
  }
  CAIRN_LOAD_ASSIGN(w.qkv, ld.Matrix(name("attn_qkv.weight"), E, C));
  CAIRN_LOAD_ASSIGN(w.z, ld.Matrix(name("attn_gate.weight"), E, g.value_dim()));
  if (g.variant == DeltaNetVariant::kQwen3Next) {
    CAIRN_LOAD_ASSIGN(w.ba, ld.Matrix(name("ssm_ba.weight"), E, 2 * g.n_head_v));
  } else {
    CAIRN_LOAD_ASSIGN(w.beta, ld.Matrix(name("ssm_beta.weight"), E, g.n_head_v));
    CAIRN_LOAD_ASSIGN(w.alpha, ld.Matrix(name("ssm_alpha.weight"), E, g.n_head_v));
  }
  CAIRN_LOAD_ASSIGN(w.out, ld.Matrix(name("ssm_out.weight"), g.value_dim(), E));
  std::vector<float> conv;
  CAIRN_LOAD_ASSIGN(conv, ld.F32(name("ssm_conv1d.weight"), {g.d_conv, C}));
  w.conv_weight = TransposeConvWeight(conv.data(), static_cast<int>(g.d_conv), C);
  CAIRN_LOAD_ASSIGN(w.dt_bias, ld.F32(name("ssm_dt.bias"), {g.n_head_v}));
  CAIRN_LOAD_ASSIGN(w.a, ld.F32(name("ssm_a"), {g.n_head_v}));
  CAIRN_LOAD_ASSIGN(w.norm, ld.F32(name("ssm_norm.weight"), {g.d_v}));
  return w;
}

namespace {

// beta = sigmoid(b) and the decay softplus(alpha + dt_bias) * a, per row and value head. qwen3next
// packs both in one projection, per key head: [beta of its value heads | alpha of the same].
void ComputeGates(const DeltaNetGeometry& g, const DeltaNetWeights& w, const float* in, int64_t n_rows, float* beta,
                  float* gdecay, ThreadPool& pool, MatMulPrecision precision) {
  const int64_t H = g.n_head_v;
  if (g.variant == DeltaNetVariant::kQwen3Next) {
    std::vector<float> ba(static_cast<size_t>(n_rows * 2 * H));
    MatMul(w.ba, in, n_rows, ba.data(), pool, precision);
    const int64_t r = H / g.n_head_k;
    for (int64_t t = 0; t < n_rows; ++t) {
      for (int64_t kh = 0; kh < g.n_head_k; ++kh) {
        const float* src = &ba[t * 2 * H + kh * 2 * r];
        std::copy_n(src, r, &beta[t * H + kh * r]);
        std::copy_n(src + r, r, &gdecay[t * H + kh * r]);
      }
    }
  } else {
    MatMul(w.beta, in, n_rows, beta, pool, precision);
    MatMul(w.alpha, in, n_rows, gdecay, pool, precision);
  }
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      float& b = beta[t * H + h];
      b = Sigmoid(b);
      float& a = gdecay[t * H + h];
      a = Softplus(a + w.dt_bias[h]) * w.a[h];
    }
  }
}

// The gated delta rule over (run, value head) items: xc holds the convolved, L2-normalised
// [q | k | v] rows; o receives the per-head outputs; each run's state advances in place and its
// snapshot taps receive copies at their rows.
void ApplyDeltaRule(const DeltaNetGeometry& g, std::span<const RecurrentRun> runs, const float* xc, const float* beta,
                    const float* gdecay, float* o, ThreadPool& pool) {
  const int64_t C = g.conv_channels(), V = g.value_dim(), H = g.n_head_v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.d_k));
  pool.ParallelFor(static_cast<int64_t>(runs.size()) * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t ri = item / H;
      const int64_t h0 = item % H;
      const int64_t h1 = std::min(H, h0 + (end - item));  // consecutive heads of one run in one call
      const RecurrentRun& r = runs[ri];
      GatedDeltaRuleArgs a;
      a.n_head_k = g.n_head_k;
      a.n_head_v = H;
      a.d_k = g.d_k;
      a.d_v = g.d_v;
      a.head_begin = h0;
      a.head_end = h1;
      a.key_head_blocks = g.variant == DeltaNetVariant::kQwen3Next;
      a.qk_stride = C;
      a.v_stride = C;
      a.gb_stride = H;
      a.scale = scale;
      a.state = r.state;
      a.out_stride = V;
      const int64_t head_floats = g.d_v * g.d_k;  // state is [n_head_v][d_v][d_k]
      ForEachTapSegment(
          r.n_rows, r.taps,
          [&](int64_t begin, int64_t n) {
            const int64_t row = r.row_begin + begin;
            const float* xr = xc + row * C;
            a.n_tokens = n;
            a.q = xr;
            a.k = xr + g.key_dim();
            a.v = xr + 2 * g.key_dim();
            a.g = gdecay + row * H;
            a.beta = beta + row * H;
            a.out = o + row * V;
            GatedDeltaRule(a);
          },
          [&](size_t k) {
            std::memcpy(r.taps[k].state + h0 * head_floats, r.state + h0 * head_floats,
                        static_cast<size_t>((h1 - h0) * head_floats) * sizeof(float));
          });
      item += h1 - h0;
    }
  });
}

}  // namespace

void DeltaNetForward(const DeltaNetGeometry& g, const DeltaNetWeights& w, float eps, std::span<const RecurrentRun> runs,
                     const float* in, int64_t n_rows, float* out, ThreadPool& pool, MatMulPrecision precision,
                     WorkBuffers& s) {
  if (n_rows == 0) return;
  const int64_t C = g.conv_channels(), V = g.value_dim(), H = g.n_head_v;
  // Reused across calls (no page faults and zero-fill per decode step).
  float* const qkv = s.Get(WorkBuffers::kMixer0 + 0, static_cast<size_t>(n_rows * C));
  float* const z = s.Get(WorkBuffers::kMixer0 + 1, static_cast<size_t>(n_rows * V));
  float* const beta = s.Get(WorkBuffers::kMixer0 + 2, static_cast<size_t>(n_rows * H));
  float* const gdecay = s.Get(WorkBuffers::kMixer0 + 3, static_cast<size_t>(n_rows * H));
  float* const xc = s.Get(WorkBuffers::kMixer0 + 4, static_cast<size_t>(n_rows * C));
  float* const o = s.Get(WorkBuffers::kMixer0 + 5, static_cast<size_t>(n_rows * V));
  MatMul(w.qkv, in, n_rows, qkv, pool, precision);
  MatMul(w.z, in, n_rows, z, pool, precision);
  ComputeGates(g, w, in, n_rows, beta, gdecay, pool, precision);

  // Convolution with carried state. A decode step's (a few thousand
  // multiply-adds) is cheaper than waking the pool: below ~64k taps it runs
  // on the calling thread.
  ConvOverRuns conv;
  conv.x = qkv;
  conv.x_stride = C;
  conv.y = xc;
  conv.channels = C;
  conv.d_conv = static_cast<int>(g.d_conv);
  conv.weight = w.conv_weight.data();
  conv.min_parallel_work = int64_t{1} << 16;
  CausalConvOverRuns(conv, runs, pool);

  // L2-normalized queries and keys, per head.
  const int64_t n_qk_heads = 2 * g.n_head_k;
  pool.ParallelFor(n_rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = xc + t * C;
      for (int64_t h = 0; h < n_qk_heads; ++h) L2Normalize(row + h * g.d_k, g.d_k, eps, row + h * g.d_k);
    }
  });

  ApplyDeltaRule(g, runs, xc, beta, gdecay, o, pool);

  // Gated RMSNorm per value head: norm(o) * silu(z).
  pool.ParallelFor(n_rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        float* oh = o + t * V + h * g.d_v;
        RmsNorm(oh, w.norm.data(), g.d_v, eps, oh);
        SwiGlu(z + t * V + h * g.d_v, oh, g.d_v, oh);
      }
    }
  });
  MatMul(w.out, o, n_rows, out, pool, precision);
}

}  // namespace cairn
