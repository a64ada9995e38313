// The feed-forward block: the gated (GLU) FFN of most architectures, or an
// ungated MLP (nemotron_h). The mixture-of-experts block (moe.h) runs its
// experts and shared expert on the same weights and activations.
//
// Contract of FfnForward: `xn` holds `rows` normalized rows of n_embd
// (pass.n_rows() by default); `out` receives as many rows of n_embd (not
// aliasing xn). Per row: out = down(act(gate(xn)) * up(xn)) with a gate,
// down(act(up(xn))) without. Deterministic per row for a given row count.
#ifndef CAIRN_BACKENDS_LAYERS_FFN_H_
#define CAIRN_BACKENDS_LAYERS_FFN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/model_loading.h"

namespace cairn {

enum class FfnActivation {
  kSilu,         // SwiGLU (llama, qwen, mamba hybrids)
  kGelu,         // GeGLU, tanh approximation (gemma)
  kReluSquared,  // max(x, 0)^2 (nemotron_h), usually without a gate
  kSwigluOai,    // gpt-oss experts: clamped SwiGLU, sigmoid(1.702 g), times (up + 1); needs a gate
};

struct FfnBlock {
  FfnActivation activation = FfnActivation::kSilu;
  int64_t n_ff = 0;             // 0: no FFN
  WeightMatrix gate, up, down;  // gate.n_out == 0: ungated

  size_t matrix_bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

// Loads blk.<layer>.ffn_{gate,up,down}<suffix>.weight of an FFN of width
// n_ff (without ffn_gate when not `gated`); the suffix names a shared
// expert ("_shexp").
absl::StatusOr<FfnBlock> LoadFfn(const ModelLoader& loader, int layer, int64_t n_embd, int64_t n_ff,
                                 FfnActivation activation, bool gated, absl::string_view suffix = "");
// The common cases: a GLU FFN, an ungated MLP.
inline absl::StatusOr<FfnBlock> LoadGluFfn(const ModelLoader& loader, int layer, int64_t n_embd, int64_t n_ff,
                                           FfnActivation activation) {
  return LoadFfn(loader, layer, n_embd, n_ff, activation, true);
}
inline absl::StatusOr<FfnBlock> LoadMlp(const ModelLoader& loader, int layer, int64_t n_embd, int64_t n_ff,
                                        FfnActivation activation) {
  return LoadFfn(loader, layer, n_embd, n_ff, activation, false);
}

void FfnForward(const FfnBlock& ffn, ForwardPass& pass, const float* xn, float* out);
// FfnForward over `rows` rows of `xn` (not necessarily the stream's).
void FfnRows(const FfnBlock& ffn, ThreadPool& pool, MatMulPrecision precision, WorkBuffers& buffers, const float* xn,
             int64_t rows, float* out);
// act(gate) * up (or act(up) without a gate) for `n` values, in place in `gate`
// (or `up`): the activation step of FFNs and experts; returns the result.
float* FfnActivate(FfnActivation activation, bool gated, float* gate, float* up, int64_t n);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_FFN_H_
