#include "backends/layers/short_conv_mixer.h"

#include "backends/kernels/conv1d.h"

namespace cairn {

absl::StatusOr<ShortConvGeometry> ReadShortConvGeometry(const ModelLoader& ld) {
  ShortConvGeometry g;
  CAIRN_LOAD_ASSIGN(g.n_embd, ld.IntIn("embedding_length", 1, int64_t{1} << 20));
  // A kernel of 1 would carry no state: the reference requires more.
  CAIRN_LOAD_ASSIGN(g.l_cache, ld.IntIn("shortconv.l_cache", 2, 64));
  return g;
}

absl::StatusOr<ShortConvWeights> LoadShortConv(const ModelLoader& ld, const ShortConvGeometry& g, int layer) {
  auto name = [layer](const char* n) { return BlockTensor(layer, n); };
  const int64_t E = g.n_embd;
  ShortConvWeights w;
  CAIRN_LOAD_ASSIGN(w.in_proj, ld.Matrix(name("shortconv.in_proj.weight"), E, 3 * E));
  CAIRN_LOAD_ASSIGN(w.out_proj, ld.Matrix(name("shortconv.out_proj.weight"), E, E));
  std::vector<float> conv;
  CAIRN_LOAD_ASSIGN(conv, ld.F32(name("shortconv.conv.weight"), {g.l_cache, E}));
  w.conv_weight = TransposeConvWeight(conv.data(), static_cast<int>(g.l_cache), E);
  return w;
}

void ShortConvForward(const ShortConvGeometry& g, const ShortConvWeights& w, std::span<const RecurrentRun> runs,
                      const float* in, int64_t n_rows, float* out, ThreadPool& pool, MatMulPrecision precision,
                      WorkBuffers& buffers) {
  if (n_rows == 0) return;
  const int64_t E = g.n_embd;
  float* bcx = buffers.Get(WorkBuffers::kMixer0 + 0, static_cast<size_t>(n_rows * 3 * E));
  float* u = buffers.Get(WorkBuffers::kMixer0 + 1, static_cast<size_t>(n_rows * E));
  float* v = buffers.Get(WorkBuffers::kMixer0 + 2, static_cast<size_t>(n_rows * E));
  MatMul(w.in_proj, in, n_rows, bcx, pool, precision);
  for (int64_t t = 0; t < n_rows; ++t) {
    const float* b = bcx + t * 3 * E;
    const float* h = b + 2 * E;
    for (int64_t c = 0; c < E; ++c) u[t * E + c] = b[c] * h[c];
  }

  ConvOverRuns conv;
  conv.x = u;
  conv.x_stride = E;
  conv.y = v;
  conv.channels = E;
  conv.d_conv = static_cast<int>(g.l_cache);
  conv.weight = w.conv_weight.data();
  conv.activation = Conv1dActivation::kNone;
  conv.min_parallel_work = int64_t{1} << 16;  // a decode step stays on the calling thread
  CausalConvOverRuns(conv, runs, pool);

  for (int64_t t = 0; t < n_rows; ++t) {
    const float* c_gate = bcx + t * 3 * E + E;
    float* vr = v + t * E;
    for (int64_t c = 0; c < E; ++c) vr[c] *= c_gate[c];
  }
  MatMul(w.out_proj, v, n_rows, out, pool, precision);
}

}  // namespace cairn
