#include "backends/layers/ffn.h"

#include "backends/kernels/activation.h"

namespace cairn {

absl::StatusOr<FfnBlock> LoadGluFfn(const ModelLoader& ld, int layer, int64_t n_embd, int64_t n_ff,
                                    FfnActivation activation) {
  FfnBlock f;
  f.activation = activation;
  f.n_ff = n_ff;
  CAIRN_LOAD_ASSIGN(f.gate, ld.Matrix(BlockTensor(layer, "ffn_gate.weight"), n_embd, n_ff));
  CAIRN_LOAD_ASSIGN(f.up, ld.Matrix(BlockTensor(layer, "ffn_up.weight"), n_embd, n_ff));
  CAIRN_LOAD_ASSIGN(f.down, ld.Matrix(BlockTensor(layer, "ffn_down.weight"), n_ff, n_embd));
  return f;
}

void FfnForward(const FfnBlock& f, ForwardPass& pass, const float* xn, float* out) {
  const int64_t R = pass.n_rows();
  const int64_t F = f.n_ff;
  ThreadPool& pool = pass.pool();
  float* gate = pass.buffers().Get(WorkBuffers::kFfnGate, static_cast<size_t>(R * F));
  float* up = pass.buffers().Get(WorkBuffers::kFfnUp, static_cast<size_t>(R * F));
  MatMul(f.gate, xn, R, gate, pool);
  MatMul(f.up, xn, R, up, pool);
  if (f.activation == FfnActivation::kGelu) {
    pool.ForEach(R, [&](int64_t i) { GeGlu(&gate[i * F], &up[i * F], F, &gate[i * F]); });
  } else {
    pool.ForEach(R, [&](int64_t i) { SwiGlu(&gate[i * F], &up[i * F], F, &gate[i * F]); });
  }
  MatMul(f.down, gate, R, out, pool);
}

}  // namespace cairn
