// The feed-forward block: the gated (GLU) FFN of most architectures. A
// mixture-of-experts block (router and experts) has room beside it.
//
// Contract of FfnForward: `xn` holds pass.n_rows() normalized rows of
// n_embd; `out` receives as many rows of n_embd (not aliasing xn). Per row:
// out = down(act(gate(xn)) * up(xn)). Deterministic per row whatever the
// other rows.
#ifndef CAIRN_BACKENDS_LAYERS_FFN_H_
#define CAIRN_BACKENDS_LAYERS_FFN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/model_loading.h"

namespace cairn {

enum class FfnActivation {
  kSilu,  // SwiGLU (llama, qwen, mamba hybrids)
  kGelu,  // GeGLU, tanh approximation (gemma)
};

struct FfnBlock {
  FfnActivation activation = FfnActivation::kSilu;
  int64_t n_ff = 0;
  WeightMatrix gate, up, down;

  size_t matrix_bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

// Loads blk.<layer>.ffn_{gate,up,down}.weight of a GLU FFN of width n_ff.
absl::StatusOr<FfnBlock> LoadGluFfn(const ModelLoader& loader, int layer, int64_t n_embd, int64_t n_ff,
                                    FfnActivation activation);

void FfnForward(const FfnBlock& ffn, ForwardPass& pass, const float* xn, float* out);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_FFN_H_
