#include "backends/layers/ffn.h"

#include "absl/strings/str_cat.h"
#include "backends/kernels/activation.h"

namespace cairn {

absl::StatusOr<FfnBlock> LoadFfn(const ModelLoader& ld, int layer, int64_t n_embd, int64_t n_ff,
                                 FfnActivation activation, bool gated, absl::string_view suffix) {
  auto name = [&](const char* which) { return BlockTensor(layer, absl::StrCat(which, suffix, ".weight")); };
  FfnBlock f;
  f.activation = activation;
  f.n_ff = n_ff;
  if (gated) CAIRN_LOAD_ASSIGN(f.gate, ld.Matrix(name("ffn_gate"), n_embd, n_ff));
  CAIRN_LOAD_ASSIGN(f.up, ld.Matrix(name("ffn_up"), n_embd, n_ff));
  CAIRN_LOAD_ASSIGN(f.down, ld.Matrix(name("ffn_down"), n_ff, n_embd));
  return f;
}

float* FfnActivate(FfnActivation activation, bool gated, float* gate, float* up, int64_t n) {
  switch (activation) {
    case FfnActivation::kSilu:
      SwiGlu(gate, up, n, gate);
      return gate;
    case FfnActivation::kGelu:
      GeGlu(gate, up, n, gate);
      return gate;
    case FfnActivation::kSwigluOai:
      // The constants gpt-oss was trained with (the reference hard-codes them too).
      SwiGluOai(gate, up, n, 1.702f, 7.0f, gate);
      return gate;
    case FfnActivation::kReluSquared:
      if (!gated) {
        ReluSquared(up, n, up);
        return up;
      }
      ReluSquared(gate, n, gate);
      for (int64_t i = 0; i < n; ++i) gate[i] *= up[i];
      return gate;
  }
  return gate;
}

void FfnRows(const FfnBlock& f, ThreadPool& pool, MatMulPrecision precision, WorkBuffers& buffers, const float* xn,
             int64_t R, float* out) {
  const int64_t F = f.n_ff;
  const bool gated = f.gate.n_out > 0;
  float* gate = gated ? buffers.Get(WorkBuffers::kFfnGate, static_cast<size_t>(R * F)) : nullptr;
  float* up = buffers.Get(WorkBuffers::kFfnUp, static_cast<size_t>(R * F));
  if (gated) MatMul(f.gate, xn, R, gate, pool, precision);
  MatMul(f.up, xn, R, up, pool, precision);
  float* act = gated ? gate : up;
  pool.ForEach(R, [&](int64_t i) { FfnActivate(f.activation, gated, gated ? &gate[i * F] : nullptr, &up[i * F], F); });
  MatMul(f.down, act, R, out, pool, precision);
}

void FfnForward(const FfnBlock& f, ForwardPass& pass, const float* xn, float* out) {
  FfnRows(f, pass.pool(), pass.precision(), pass.buffers(), xn, pass.n_rows(), out);
}

}  // namespace cairn
