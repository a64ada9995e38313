#include "backends/layers/mamba_mixer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/kernels/activation.h"
#include "backends/kernels/conv1d.h"
#include "backends/kernels/ssm.h"
#include "backends/layers/model_loading.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The grain for ParallelFor over `items` work items totalling `work` scalar
// updates: all items on the calling thread when the job is too small to
// repay waking the workers. Decoding one token, the conv (~10k MACs) and the
// scan (~250k updates, tens of microseconds) are such jobs; a worker that is
// descheduled on a busy machine costs far more than that.
constexpr int64_t kMinParallelWork = int64_t{1} << 20;
int64_t GrainFor(int64_t items, int64_t work) { return work < kMinParallelWork ? std::max<int64_t>(items, 1) : 1; }

}  // namespace

absl::StatusOr<MambaGeometry> ReadMambaGeometry(const ModelLoader& ld, MambaVersion version) {
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  MambaGeometry g;
  g.version = version;
  CAIRN_LOAD_ASSIGN(g.n_embd, ld.IntIn("embedding_length", 1, kMaxDim));
  CAIRN_LOAD_ASSIGN(g.d_conv, ld.IntIn("ssm.conv_kernel", 1, 64));
  CAIRN_LOAD_ASSIGN(g.d_inner, ld.IntIn("ssm.inner_size", 1, kMaxDim));
  CAIRN_LOAD_ASSIGN(g.d_state, ld.IntIn("ssm.state_size", 1, 4096));
  int64_t time_step_rank = 0;
  CAIRN_LOAD_ASSIGN(time_step_rank, ld.IntIn("ssm.time_step_rank", 1, kMaxDim));
  double eps = 0;
  CAIRN_LOAD_ASSIGN(eps, ld.FloatOr("attention.layer_norm_rms_epsilon", 1e-5));
  g.rms_eps = static_cast<float>(eps);

  if (version == MambaVersion::kMamba2) {
    g.n_head = time_step_rank;
    CAIRN_LOAD_ASSIGN(g.n_group, ld.IntIn("ssm.group_count", 1, kMaxDim));
    if (g.d_inner % g.n_head != 0 || g.n_head % g.n_group != 0) {
      return ld.Error(absl::StrCat("ssm.inner_size ", g.d_inner, ", heads (ssm.time_step_rank) ", g.n_head,
                                   " and ssm.group_count ", g.n_group, " must nest (groups | heads | inner size)"));
    }
    g.head_dim = g.d_inner / g.n_head;
  } else {
    g.n_head = g.d_inner;
    g.head_dim = 1;
    g.n_group = 1;
    g.dt_rank = time_step_rank;
    CAIRN_LOAD_ASSIGN(g.dt_b_c_rms, ld.BoolOr("ssm.dt_b_c_rms", false));
  }
  return g;
}

size_t MambaMixerWeights::matrix_bytes() const {
  return in_proj.bytes() + x_proj.bytes() + dt_proj.bytes() + out_proj.bytes();
}

absl::StatusOr<MambaMixerWeights> LoadMambaMixer(const ModelLoader& ld, const MambaGeometry& g, int layer) {
  auto name = [layer](const char* n) { return BlockTensor(layer, n); };
  const int64_t conv_ch = g.conv_channels();
  MambaMixerWeights w;
  CAIRN_LOAD_ASSIGN(w.in_proj, ld.Matrix(name("ssm_in.weight"), g.n_embd, g.in_proj_size()));
  CAIRN_LOAD_ASSIGN(w.out_proj, ld.Matrix(name("ssm_out.weight"), g.d_inner, g.n_embd));
  std::vector<float> conv;
  CAIRN_LOAD_ASSIGN(conv, ld.F32(name("ssm_conv1d.weight"), {g.d_conv, conv_ch}));
  w.conv_weight = TransposeConvWeight(conv.data(), static_cast<int>(g.d_conv), conv_ch);
  CAIRN_LOAD_ASSIGN(w.conv_bias, ld.F32(name("ssm_conv1d.bias"), {conv_ch}));
  if (g.version == MambaVersion::kMamba2) {
    CAIRN_LOAD_ASSIGN(w.dt_bias, ld.F32(name("ssm_dt.bias"), {g.n_head}));
    CAIRN_LOAD_ASSIGN(w.A, ld.F32(name("ssm_a"), {1, g.n_head}));
    CAIRN_LOAD_ASSIGN(w.D, ld.F32(name("ssm_d"), {1, g.n_head}));
    // The grouped norm is optional in the reference graph.
    if (ld.HasTensor(name("ssm_norm.weight"))) {
      CAIRN_LOAD_ASSIGN(w.norm, ld.F32(name("ssm_norm.weight"), {g.d_inner / g.n_group, g.n_group}));
    }
  } else {
    CAIRN_LOAD_ASSIGN(w.x_proj, ld.Matrix(name("ssm_x.weight"), g.d_inner, g.dt_rank + 2 * g.d_state));
    CAIRN_LOAD_ASSIGN(w.dt_proj, ld.Matrix(name("ssm_dt.weight"), g.dt_rank, g.d_inner));
    CAIRN_LOAD_ASSIGN(w.dt_bias, ld.F32(name("ssm_dt.bias"), {g.d_inner}));
    std::vector<float> a;
    CAIRN_LOAD_ASSIGN(a, ld.F32(name("ssm_a"), {g.d_state, g.d_inner}));
    w.A = TransposeMamba1A(a.data(), g.d_inner, g.d_state);
    CAIRN_LOAD_ASSIGN(w.D, ld.F32(name("ssm_d"), {g.d_inner}));
    if (g.dt_b_c_norm_weights) {
      CAIRN_LOAD_ASSIGN(w.dt_norm, ld.F32(name("ssm_dt_norm.weight"), {g.dt_rank}));
      CAIRN_LOAD_ASSIGN(w.b_norm, ld.F32(name("ssm_b_norm.weight"), {g.d_state}));
      CAIRN_LOAD_ASSIGN(w.c_norm, ld.F32(name("ssm_c_norm.weight"), {g.d_state}));
    }
  }
  return w;
}

namespace {

// The convolution of every run over the conv channels of `proj` starting at
// column `col`, into xc [n_rows][conv_channels], with bias and silu.
void ConvAll(const MambaGeometry& g, const MambaMixerWeights& w, std::span<const RecurrentRun> runs, const float* proj,
             int64_t proj_stride, int64_t col, float* xc, ThreadPool& pool) {
  ConvOverRuns c;
  c.x = proj + col;
  c.x_stride = proj_stride;
  c.y = xc;
  c.channels = g.conv_channels();
  c.d_conv = static_cast<int>(g.d_conv);
  c.weight = w.conv_weight.data();
  c.bias = w.conv_bias.data();
  c.min_parallel_work = kMinParallelWork;
  CausalConvOverRuns(c, runs, pool);
}

void Mamba2Forward(const MambaGeometry& g, const MambaMixerWeights& w, std::span<const RecurrentRun> runs,
                   const float* in, int64_t n_rows, float* out, ThreadPool& pool, MatMulPrecision precision,
                   WorkBuffers& scratch) {
  const int64_t d_proj = g.in_proj_size();
  const int64_t conv_ch = g.conv_channels();
  const int64_t d_inner = g.d_inner;
  float* proj = scratch.Get(WorkBuffers::kMixer0 + 0, static_cast<size_t>(n_rows * d_proj));
  MatMul(w.in_proj, in, n_rows, proj, pool, precision);

  // Columns of the projection: z | x B C | dt.
  float* xbc = scratch.Get(WorkBuffers::kMixer0 + 1, static_cast<size_t>(n_rows * conv_ch));
  ConvAll(g, w, runs, proj, d_proj, d_inner, xbc, pool);

  float* y = scratch.Get(WorkBuffers::kMixer0 + 2, static_cast<size_t>(n_rows * d_inner));
  const int64_t n_head = g.n_head;
  const int64_t scan_items = static_cast<int64_t>(runs.size()) * n_head;
  pool.ParallelFor(scan_items, GrainFor(scan_items, n_rows * d_inner * g.d_state), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t ri = item / n_head;
      const int64_t h0 = item % n_head;
      // Consecutive heads of one run go to one kernel call.
      const int64_t h1 = std::min(n_head, h0 + (end - item));
      const RecurrentRun& r = runs[ri];
      Mamba2ScanArgs a;
      a.n_head = n_head;
      a.head_dim = g.head_dim;
      a.n_group = g.n_group;
      a.d_state = g.d_state;
      a.head_begin = h0;
      a.head_end = h1;
      a.x_stride = conv_ch;
      a.bc_stride = conv_ch;
      a.dt_stride = d_proj;
      a.dt_bias = w.dt_bias.data();
      a.A = w.A.data();
      a.D = w.D.data();
      a.state = r.state;
      a.y_stride = d_inner;
      const int64_t head_floats = g.d_state * g.head_dim;  // state is [n_head][d_state][head_dim]
      ForEachTapSegment(
          r.n_rows, r.taps,
          [&](int64_t begin, int64_t n) {
            const float* xr = xbc + (r.row_begin + begin) * conv_ch;
            a.n_tokens = n;
            a.x = xr;
            a.B = xr + d_inner;
            a.C = xr + d_inner + g.n_group * g.d_state;
            a.dt = proj + (r.row_begin + begin) * d_proj + d_inner + conv_ch;
            a.y = y + (r.row_begin + begin) * d_inner;
            Mamba2Scan(a);
          },
          [&](size_t k) {
            std::memcpy(r.taps[k].state + h0 * head_floats, r.state + h0 * head_floats,
                        static_cast<size_t>((h1 - h0) * head_floats) * sizeof(float));
          });
      item += h1 - h0;
    }
  });

  // Gate with silu(z), then the grouped norm.
  pool.ParallelFor(n_rows, GrainFor(n_rows, n_rows * d_inner * 8), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* yr = y + t * d_inner;
      SwiGlu(proj + t * d_proj, yr, d_inner, yr);
      if (!w.norm.empty()) {
        GroupRmsNorm(yr, g.n_group, d_inner / g.n_group, w.norm.data(), g.rms_eps, yr);
      }
    }
  });
  MatMul(w.out_proj, y, n_rows, out, pool, precision);
}

void Mamba1Forward(const MambaGeometry& g, const MambaMixerWeights& w, std::span<const RecurrentRun> runs,
                   const float* in, int64_t n_rows, float* out, ThreadPool& pool, MatMulPrecision precision,
                   WorkBuffers& scratch) {
  const int64_t d_inner = g.d_inner;
  const int64_t d_proj = g.in_proj_size();
  float* proj = scratch.Get(WorkBuffers::kMixer0 + 0, static_cast<size_t>(n_rows * d_proj));
  MatMul(w.in_proj, in, n_rows, proj, pool, precision);

  // Columns of the projection: x | z.
  float* xc = scratch.Get(WorkBuffers::kMixer0 + 1, static_cast<size_t>(n_rows * d_inner));
  ConvAll(g, w, runs, proj, d_proj, 0, xc, pool);

  const int64_t d_xdb = g.dt_rank + 2 * g.d_state;
  float* xdb = scratch.Get(WorkBuffers::kMixer0 + 2, static_cast<size_t>(n_rows * d_xdb));
  MatMul(w.x_proj, xc, n_rows, xdb, pool, precision);

  // dt (made contiguous for its projection) and optionally normalized dt, B, C
  // (with their weights when the model has them: empty vectors give null).
  float* dt_low = scratch.Get(WorkBuffers::kMixer0 + 3, static_cast<size_t>(n_rows * g.dt_rank));
  auto weight = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  for (int64_t t = 0; t < n_rows; ++t) {
    float* row = xdb + t * d_xdb;
    if (g.dt_b_c_rms) {
      float* b = row + g.dt_rank;
      float* c = b + g.d_state;
      GroupRmsNorm(row, 1, g.dt_rank, weight(w.dt_norm), g.rms_eps, row);
      GroupRmsNorm(b, 1, g.d_state, weight(w.b_norm), g.rms_eps, b);
      GroupRmsNorm(c, 1, g.d_state, weight(w.c_norm), g.rms_eps, c);
    }
    std::memcpy(dt_low + t * g.dt_rank, row, static_cast<size_t>(g.dt_rank) * sizeof(float));
  }
  float* dt = scratch.Get(WorkBuffers::kMixer0 + 4, static_cast<size_t>(n_rows * d_inner));
  MatMul(w.dt_proj, dt_low, n_rows, dt, pool, precision);
  for (int64_t t = 0; t < n_rows; ++t) {
    float* row = dt + t * d_inner;
    for (int64_t c = 0; c < d_inner; ++c) row[c] += w.dt_bias[c];
  }

  float* y = scratch.Get(WorkBuffers::kMixer0 + 5, static_cast<size_t>(n_rows * d_inner));
  constexpr int64_t kBlock = 64;
  const int64_t n_blocks = CeilDiv(d_inner, kBlock);
  const int64_t scan_items = static_cast<int64_t>(runs.size()) * n_blocks;
  // Mamba-1 evaluates exp per state element: weigh it as ~8 updates.
  pool.ParallelFor(scan_items, GrainFor(scan_items, n_rows * d_inner * g.d_state * 8), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const RecurrentRun& r = runs[item / n_blocks];
      const int64_t c0 = (item % n_blocks) * kBlock;
      Mamba1ScanArgs a;
      a.d_inner = d_inner;
      a.d_state = g.d_state;
      a.channel_begin = c0;
      a.channel_end = std::min(d_inner, c0 + kBlock);
      a.x_stride = d_inner;
      a.dt_stride = d_inner;
      a.bc_stride = d_xdb;
      a.A_t = w.A.data();
      a.D = w.D.data();
      a.state = r.state;
      a.y_stride = d_inner;
      ForEachTapSegment(
          r.n_rows, r.taps,
          [&](int64_t begin, int64_t n) {
            const int64_t row = r.row_begin + begin;
            a.n_tokens = n;
            a.x = xc + row * d_inner;
            a.dt = dt + row * d_inner;
            a.B = xdb + row * d_xdb + g.dt_rank;
            a.C = a.B + g.d_state;
            a.y = y + row * d_inner;
            Mamba1Scan(a);
          },
          [&](size_t k) {
            // state is [d_state][d_inner]: this item's channels in every row.
            for (int64_t n = 0; n < g.d_state; ++n) {
              std::memcpy(r.taps[k].state + n * d_inner + c0, r.state + n * d_inner + c0,
                          static_cast<size_t>(a.channel_end - c0) * sizeof(float));
            }
          });
    }
  });

  for (int64_t t = 0; t < n_rows; ++t) {
    float* yr = y + t * d_inner;
    SwiGlu(proj + t * d_proj + d_inner, yr, d_inner, yr);
  }
  MatMul(w.out_proj, y, n_rows, out, pool, precision);
}

}  // namespace

void MambaMixerForward(const MambaGeometry& g, const MambaMixerWeights& w, std::span<const RecurrentRun> runs,
                       const float* in, int64_t n_rows, float* out, ThreadPool& pool, MatMulPrecision precision,
                       WorkBuffers& s) {
  if (n_rows == 0) return;
  if (g.version == MambaVersion::kMamba2) {
    Mamba2Forward(g, w, runs, in, n_rows, out, pool, precision, s);
  } else {
    Mamba1Forward(g, w, runs, in, n_rows, out, pool, precision, s);
  }
}

}  // namespace cairn
