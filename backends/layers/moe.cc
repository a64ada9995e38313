#include "backends/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "backends/kernels/activation.h"
#include "backends/kernels/vec.h"

namespace cairn {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

absl::StatusOr<std::vector<float>> OptionalF32(const ModelLoader& ld, const std::string& name,
                                               const std::vector<int64_t>& shape, Presence presence) {
  if (presence == Presence::kAbsent || (presence == Presence::kOptional && !ld.HasTensor(name))) {
    return std::vector<float>();
  }
  return ld.F32(name, shape);
}

absl::StatusOr<ExpertMatrices> LoadExperts(const ModelLoader& ld, int layer, const char* which, int64_t n_in,
                                           int64_t n_out, int64_t n_expert, Presence bias) {
  ExpertMatrices m;
  const TensorInfo* t = nullptr;
  CAIRN_LOAD_ASSIGN(t, ld.Tensor(BlockTensor(layer, absl::StrCat(which, ".weight")), {n_in, n_out, n_expert}));
  m.type = t->type;
  m.n_in = n_in;
  m.n_out = n_out;
  m.data = t->data;
  CAIRN_LOAD_ASSIGN(m.bias, OptionalF32(ld, BlockTensor(layer, absl::StrCat(which, ".bias")), {n_out, n_expert}, bias));
  return m;
}

// The router's choice for one row: `chosen` and `weight` get n_used entries,
// best first. `logits` (n_expert) is used as scratch.
void Route(const MoeBlock& m, float* logits, int32_t* chosen, float* weight) {
  const int64_t X = m.n_expert, K = m.n_used;
  if (!m.router_bias.empty()) AddF32(logits, m.router_bias.data(), logits, X);
  std::vector<float> probs(logits, logits + X);
  if (m.gating == RouterGating::kSoftmax) {
    SoftmaxInPlace(probs.data(), X);
  } else if (m.gating == RouterGating::kSigmoid) {
    for (float& p : probs) p = Sigmoid(p);
  }
  std::vector<float> selection = probs;
  if (!m.selection_bias.empty()) AddF32(selection.data(), m.selection_bias.data(), selection.data(), X);
  std::vector<int32_t> order(X);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
    return selection[a] > selection[b] || (selection[a] == selection[b] && a < b);
  });
  for (int64_t k = 0; k < K; ++k) {
    chosen[k] = order[k];
    weight[k] = probs[order[k]];
  }
  if (m.gating == RouterGating::kSoftmaxOfChosen) SoftmaxInPlace(weight, K);
  if (m.normalize) {
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) sum += weight[k];
    sum = std::max(sum, 6.103515625e-5f);  // the smallest normal F16, as the reference clamps
    for (int64_t k = 0; k < K; ++k) weight[k] /= sum;
  }
  if (m.scale != 0.0f && m.scale != 1.0f) {
    for (int64_t k = 0; k < K; ++k) weight[k] *= m.scale;
  }
}

void AddExpertBias(const ExpertMatrices& m, int64_t e, float* y, int64_t rows) {
  if (m.bias.empty()) return;
  for (int64_t i = 0; i < rows; ++i) AddF32(&y[i * m.n_out], &m.bias[e * m.n_out], &y[i * m.n_out], m.n_out);
}

}  // namespace

size_t MoeBlock::bytes_per_row() const {
  return router.bytes() +
         static_cast<size_t>(n_used) * (gate.expert_bytes() + up.expert_bytes() + down.expert_bytes()) +
         shared.gate.bytes() + shared.up.bytes() + shared.down.bytes();
}

size_t MoeBlock::total_bytes() const {
  return router.bytes() +
         static_cast<size_t>(n_expert) * (gate.expert_bytes() + up.expert_bytes() + down.expert_bytes()) +
         shared.gate.bytes() + shared.up.bytes() + shared.down.bytes();
}

absl::Status ReadExpertCounts(const ModelLoader& ld, MoeSpec& spec) {
  CAIRN_LOAD_ASSIGN(spec.n_expert, ld.IntIn("expert_count", 1, 4096));
  CAIRN_LOAD_ASSIGN(spec.n_used, ld.IntIn("expert_used_count", 1, spec.n_expert));
  return absl::OkStatus();
}

absl::StatusOr<MoeBlock> LoadMoe(const ModelLoader& ld, int layer, int64_t n_embd, const MoeSpec& spec) {
  MoeBlock m;
  m.n_expert = spec.n_expert;
  m.n_used = spec.n_used;
  m.gating = spec.gating;
  m.normalize = spec.normalize;
  m.scale = spec.scale;
  m.activation = spec.activation;
  const int64_t X = spec.n_expert, F = spec.n_ff;
  if (F <= 0) return ld.Error(absl::StrCat("layer ", layer, ": expert feed-forward length ", F, " is not positive"));
  CAIRN_LOAD_ASSIGN(m.router, ld.RowMatrix(BlockTensor(layer, "ffn_gate_inp.weight"), n_embd, X));
  CAIRN_LOAD_ASSIGN(m.router_bias, OptionalF32(ld, BlockTensor(layer, "ffn_gate_inp.bias"), {X}, spec.router_bias));
  CAIRN_LOAD_ASSIGN(m.selection_bias,
                    OptionalF32(ld, BlockTensor(layer, "exp_probs_b.bias"), {X}, spec.selection_bias));
  if (spec.gated_experts) {
    CAIRN_LOAD_ASSIGN(m.gate, LoadExperts(ld, layer, "ffn_gate_exps", n_embd, F, X, spec.expert_biases));
  }
  CAIRN_LOAD_ASSIGN(m.up, LoadExperts(ld, layer, "ffn_up_exps", n_embd, F, X, spec.expert_biases));
  CAIRN_LOAD_ASSIGN(m.down, LoadExperts(ld, layer, "ffn_down_exps", F, n_embd, X, spec.expert_biases));
  if (spec.n_ff_shared > 0) {
    CAIRN_LOAD_ASSIGN(m.shared,
                      LoadFfn(ld, layer, n_embd, spec.n_ff_shared, spec.activation, spec.gated_shared, "_shexp"));
    CAIRN_LOAD_ASSIGN(m.shared_gate,
                      OptionalF32(ld, BlockTensor(layer, "ffn_gate_inp_shexp.weight"), {n_embd}, spec.shared_gate));
  }
  return m;
}

void MoeForward(const MoeBlock& m, ForwardPass& pass, const float* xn, float* out) {
  ThreadPool& pool = pass.pool();
  const int64_t R = pass.n_rows(), E = pass.width(), X = m.n_expert, K = m.n_used, F = m.n_ff();
  if (R == 0) return;
  std::vector<float> logits(static_cast<size_t>(R * X));
  // Always exact: 8-bit activations move router logits enough to change
  // which experts a row takes.
  MatMul(m.router, xn, R, logits.data(), pool, MatMulPrecision::kExact);
  std::vector<int32_t> chosen(static_cast<size_t>(R * K));
  std::vector<float> weight(static_cast<size_t>(R * K));
  pool.ForEach(R, [&](int64_t r) { Route(m, &logits[r * X], &chosen[r * K], &weight[r * K]); });

  // Rows grouped by expert: each expert's matrices are read once for all
  // the rows that chose it. y[(r * K + k)] is row r's k-th expert output.
  std::vector<std::vector<int64_t>> assigned(X);
  for (int64_t i = 0; i < R * K; ++i) assigned[chosen[i]].push_back(i);
  const bool gated = m.gate.data != nullptr;
  std::vector<float> y(static_cast<size_t>(R * K * E)), xs, g, u, d;
  for (int64_t e = 0; e < X; ++e) {
    const std::vector<int64_t>& slots = assigned[e];
    const int64_t n = static_cast<int64_t>(slots.size());
    if (n == 0) continue;
    xs.resize(static_cast<size_t>(n * E));
    for (int64_t j = 0; j < n; ++j) std::copy_n(&xn[slots[j] / K * E], E, &xs[j * E]);
    u.resize(static_cast<size_t>(n * F));
    MatMul(m.up.expert(e), xs.data(), n, u.data(), pool, pass.precision());
    AddExpertBias(m.up, e, u.data(), n);
    if (gated) {
      g.resize(static_cast<size_t>(n * F));
      MatMul(m.gate.expert(e), xs.data(), n, g.data(), pool, pass.precision());
      AddExpertBias(m.gate, e, g.data(), n);
    }
    const float* act = gated ? g.data() : u.data();
    pool.ForEach(n, [&](int64_t j) { FfnActivate(m.activation, gated, gated ? &g[j * F] : nullptr, &u[j * F], F); });
    d.resize(static_cast<size_t>(n * E));
    MatMul(m.down.expert(e), act, n, d.data(), pool, pass.precision());
    AddExpertBias(m.down, e, d.data(), n);
    for (int64_t j = 0; j < n; ++j) std::copy_n(&d[j * E], E, &y[slots[j] * E]);
  }

  // Weighted sum in rank order, then the shared expert.
  float* shared = nullptr;
  if (m.shared.n_ff > 0) {
    shared = pass.buffers().Get(WorkBuffers::kSharedExpert, static_cast<size_t>(R * E));
    FfnRows(m.shared, pool, pass.precision(), pass.buffers(), xn, R, shared);
  }
  pool.ForEach(R, [&](int64_t r) {
    float* o = &out[r * E];
    for (int64_t k = 0; k < K; ++k) {
      const float w = weight[r * K + k];
      const float* yk = &y[(r * K + k) * E];
      for (int64_t i = 0; i < E; ++i) o[i] = k == 0 ? yk[i] * w : o[i] + yk[i] * w;
    }
    if (shared == nullptr) return;
    const float* sh = &shared[r * E];
    if (m.shared_gate.empty()) {
      AddF32(o, sh, o, E);
      return;
    }
    const float s = Sigmoid(DotF32(m.shared_gate.data(), &xn[r * E], E));
    for (int64_t i = 0; i < E; ++i) o[i] += sh[i] * s;
  });
}

}  // namespace cairn
