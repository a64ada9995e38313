// The mixture-of-experts block: a router picks n_used of n_expert expert
// FFNs per row and weighs their outputs; an optional shared expert runs on
// every row.
//
// Contract of MoeForward: `xn` holds pass.n_rows() normalized rows of
// n_embd; `out` receives as many rows (not aliasing xn). Per row:
//   logits = router . x (+ router_bias)
//   probs  = softmax(logits) | sigmoid(logits) | logits (kSoftmaxOfChosen)
//   chosen = the n_used largest probs (+ selection_bias, which only selects)
//   w      = probs[chosen] (kSoftmaxOfChosen: softmax over the chosen
//            logits); divided by their sum (clamped at 6.1e-5) when
//            `normalize`; times `scale` when it is neither 0 nor 1
//   out    = sum over k of w[k] * expert_{chosen[k]}(x)   (in order of rank)
//          + shared(x) (times sigmoid(shared_gate . x) when shared_gate is set)
// Expert matrices are the slices of 3-D tensors [n_in, n_out, n_expert],
// in any type MatMul takes. Rows are grouped by expert, so each expert's
// weights are read once per call however many rows chose it, and experts no
// row chose are not read at all (a decode step reads n_used of n_expert).
#ifndef CAIRN_BACKENDS_LAYERS_MOE_H_
#define CAIRN_BACKENDS_LAYERS_MOE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/layers/attention.h"
#include "backends/layers/ffn.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/model_loading.h"

namespace cairn {

enum class RouterGating {
  kSoftmax,          // weights from the softmax over every expert (qwen, jamba, granite)
  kSigmoid,          // a sigmoid per expert (nemotron_h_moe)
  kSoftmaxOfChosen,  // top-k of the raw logits, softmax over the chosen ones (gpt-oss)
};

// The experts' slices of one 3-D tensor [n_in, n_out, n_expert].
struct ExpertMatrices {
  GgmlType type = GgmlType::kF32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const uint8_t* data = nullptr;
  std::vector<float> bias;  // [n_expert][n_out], or empty

  WeightMatrix expert(int64_t e) const {
    const WeightMatrix w{type, n_in, n_out, nullptr};
    return WeightMatrix{type, n_in, n_out, data + static_cast<size_t>(e) * w.bytes()};
  }
  size_t expert_bytes() const { return WeightMatrix{type, n_in, n_out, nullptr}.bytes(); }
};

struct MoeBlock {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  RouterGating gating = RouterGating::kSoftmax;
  bool normalize = false;
  float scale = 0.0f;
  WeightMatrix router;                // n_embd -> n_expert
  std::vector<float> router_bias;     // [n_expert] or empty
  std::vector<float> selection_bias;  // [n_expert] or empty
  FfnActivation activation = FfnActivation::kSilu;
  ExpertMatrices gate, up, down;   // gate.data null: ungated experts
  FfnBlock shared;                 // n_ff 0: none
  std::vector<float> shared_gate;  // [n_embd] or empty: ungated shared expert

  int64_t n_ff() const { return up.n_out; }
  // Weight bytes one row reads: the router, n_used experts, the shared expert.
  size_t bytes_per_row() const;
  // Every weight byte of the block.
  size_t total_bytes() const;
};

// What an architecture's MoE layers are, for LoadMoe.
struct MoeSpec {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  int64_t n_ff = 0;         // expert width
  int64_t n_ff_shared = 0;  // 0: no shared expert
  RouterGating gating = RouterGating::kSoftmax;
  bool normalize = false;
  float scale = 0.0f;
  FfnActivation activation = FfnActivation::kSilu;
  bool gated_experts = true;                    // ffn_gate_exps present
  bool gated_shared = true;                     // ffn_gate_shexp present
  Presence shared_gate = Presence::kAbsent;     // ffn_gate_inp_shexp.weight
  Presence router_bias = Presence::kAbsent;     // ffn_gate_inp.bias
  Presence selection_bias = Presence::kAbsent;  // exp_probs_b.bias
  Presence expert_biases = Presence::kAbsent;   // ffn_{gate,up,down}_exps.bias
};

// The MoE hyperparameters every file carries: expert_count (>= 1) and
// expert_used_count (1 .. expert_count) into `spec`.
absl::Status ReadExpertCounts(const ModelLoader& loader, MoeSpec& spec);

// Loads blk.<layer>.ffn_gate_inp, ffn_{gate,up,down}_exps, the shared expert
// ffn_{gate,up,down}_shexp and whatever else `spec` asks for.
absl::StatusOr<MoeBlock> LoadMoe(const ModelLoader& loader, int layer, int64_t n_embd, const MoeSpec& spec);

void MoeForward(const MoeBlock& moe, ForwardPass& pass, const float* xn, float* out);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_MOE_H_
