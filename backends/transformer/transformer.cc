#include "backends/transformer/transformer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "backends/kernels/activation.h"
#include "backends/kernels/attention.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/norm.h"
#include "backends/kernels/rope.h"
#include "backends/kernels/thread_pool.h"
#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"
#include "backends/model_loading.h"
#include "backends/transformer/kv_memory.h"

namespace cairn {
namespace {

enum class Arch { kLlama, kQwen2, kQwen3 };

absl::StatusOr<Arch> ParseArch(const std::string& arch) {
  if (arch == "llama") return Arch::kLlama;
  if (arch == "qwen2") return Arch::kQwen2;
  if (arch == "qwen3") return Arch::kQwen3;
  return absl::InvalidArgumentError(
      absl::StrCat("architecture '", arch, "' is not served by the transformer family"));
}

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_norm, k_norm;          // qwen3
  std::vector<float> bq, bk, bv, bo;          // optional biases
  WeightMatrix wq, wk, wv, wo, gate, up, down;
  int32_t n_head_kv = 0;
  int64_t n_ff = 0;
};

struct HParams {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  int64_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  float eps = 1e-5f;
  float kq_scale = 1.0f;
  RopeParams rope;
};

class TransformerBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(std::shared_ptr<const ModelFile> model,
                                                         const BackendOptions& options);

  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override;
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override;

 private:
  TransformerBackend(std::shared_ptr<const ModelFile> model, int n_threads)
      : model_(std::move(model)), pool_(n_threads) {}
  absl::Status Load(const BackendOptions& options);
  absl::Status Validate(std::span<const SequenceRun> batch) const;

  std::shared_ptr<const ModelFile> model_;
  ThreadPool pool_;
  std::mutex forward_mu_;  // Forward uses every pool thread: one call at a time
  ModelInfo info_;
  HParams hp_;
  KvGeometry geometry_;
  const TensorInfo* tok_embd_ = nullptr;
  std::vector<float> output_norm_;
  WeightMatrix output_;
  std::vector<LayerWeights> layers_;
};

absl::Status TransformerBackend::Load(const BackendOptions& options) {
  const Metadata& md = model_->metadata();
  const ModelFile& m = *model_;
  CAIRN_LOAD_ASSIGN_MD(hp_.arch_name, m.Architecture(), model_->path());
  absl::StatusOr<Arch> arch = ParseArch(hp_.arch_name);
  if (!arch.ok()) return arch.status();
  hp_.arch = *arch;
  const std::string a = hp_.arch_name + ".";

  int64_t v = 0;
  CAIRN_LOAD_ASSIGN_MD(hp_.n_embd, md.GetInt(a + "embedding_length"), model_->path());
  CAIRN_LOAD_ASSIGN_MD(v, md.GetInt(a + "block_count"), model_->path());
  hp_.n_layer = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetInt(a + "attention.head_count"), model_->path());
  hp_.n_head = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "context_length", 2048), model_->path());
  hp_.n_ctx_train = static_cast<int32_t>(v);
  if (hp_.n_embd <= 0 || hp_.n_layer <= 0 || hp_.n_head <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': non-positive embedding_length, ",
                                                   "block_count or head_count"));
  }
  std::vector<int64_t> n_head_kv, n_ff;
  CAIRN_LOAD_ASSIGN_MD(n_head_kv, PerLayer(md, a + "attention.head_count_kv", hp_.n_layer), model_->path());
  CAIRN_LOAD_ASSIGN_MD(n_ff, PerLayer(md, a + "feed_forward_length", hp_.n_layer), model_->path());
  // K/V rows have one width for every layer in a full cache.
  for (int64_t h : n_head_kv) {
    if (h != n_head_kv[0] || h <= 0 || hp_.n_head % h != 0) {
      return absl::InvalidArgumentError(absl::StrCat("model '", m.path(),
                                                     "': head_count_kv must be one positive divisor of head_count"));
    }
  }
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "attention.key_length", hp_.n_embd / hp_.n_head), model_->path());
  hp_.head_dim_k = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "attention.value_length", hp_.head_dim_k), model_->path());
  hp_.head_dim_v = static_cast<int32_t>(v);
  double eps = 0;
  CAIRN_LOAD_ASSIGN_MD(eps, md.GetFloat(a + "attention.layer_norm_rms_epsilon"), model_->path());
  hp_.eps = static_cast<float>(eps);

  // RoPE.
  RopeParams& rope = hp_.rope;
  rope.type = hp_.arch == Arch::kLlama ? RopeType::kNormal : RopeType::kNeox;
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "rope.dimension_count", hp_.head_dim_k), model_->path());
  rope.n_dims = static_cast<int32_t>(v);
  if (rope.n_dims <= 0 || rope.n_dims > hp_.head_dim_k || rope.n_dims % 2) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': rope.dimension_count ", rope.n_dims,
                                                   " does not fit head dim ", hp_.head_dim_k));
  }
  double base = 0;
  CAIRN_LOAD_ASSIGN_MD(base, md.GetFloatOr(a + "rope.freq_base", 10000.0), model_->path());
  rope.freq_base = static_cast<float>(base);
  std::string scaling;
  CAIRN_LOAD_ASSIGN_MD(scaling, md.GetStringOr(a + "rope.scaling.type", "linear"), model_->path());
  if (scaling != "linear" && scaling != "none") {
    return absl::UnimplementedError(absl::StrCat("model '", m.path(), "': rope scaling '", scaling,
                                                 "' is not supported (linear, none)"));
  }
  double factor = 0;
  CAIRN_LOAD_ASSIGN_MD(factor, md.GetFloatOr(a + "rope.scaling.factor", 0.0), model_->path());
  if (factor == 0.0) CAIRN_LOAD_ASSIGN_MD(factor, md.GetFloatOr(a + "rope.scale_linear", 0.0), model_->path());
  rope.freq_scale = (scaling == "none" || factor == 0.0) ? 1.0f : static_cast<float>(1.0 / factor);
  CAIRN_LOAD_ASSIGN(rope.freq_factors, LoadVector(m, "rope_freqs.weight", rope.n_dims / 2, false));

  double attn_scale = 0;
  CAIRN_LOAD_ASSIGN_MD(attn_scale, md.GetFloatOr(a + "attention.scale", 0.0), model_->path());
  hp_.kq_scale = (hp_.arch == Arch::kLlama && attn_scale != 0.0)
                     ? static_cast<float>(attn_scale)
                     : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));

  // Global tensors.
  CAIRN_LOAD_ASSIGN(tok_embd_, m.GetTensor("token_embd.weight"));
  if (tok_embd_->shape.size() < 2 || tok_embd_->shape[0] != hp_.n_embd) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': token_embd.weight rows are not n_embd wide"));
  }
  hp_.n_vocab = static_cast<int32_t>(tok_embd_->n_rows());
  CAIRN_LOAD_ASSIGN(output_norm_, LoadVector(m, "output_norm.weight", hp_.n_embd, true));
  if (m.FindTensor("output.weight")) {
    CAIRN_LOAD_ASSIGN(output_, LoadMatrix(m, "output.weight", hp_.n_embd, hp_.n_vocab));
  } else {
    output_ = WeightMatrix::FromTensor(*tok_embd_);  // tied output
  }

  const int64_t q_dim = static_cast<int64_t>(hp_.n_head) * hp_.head_dim_k;
  const int64_t kv_heads = n_head_kv[0];
  const int64_t k_dim = kv_heads * hp_.head_dim_k;
  const int64_t v_dim = kv_heads * hp_.head_dim_v;
  const int64_t o_dim = static_cast<int64_t>(hp_.n_head) * hp_.head_dim_v;
  size_t weight_bytes = output_.bytes();
  layers_.resize(hp_.n_layer);
  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& L = layers_[il];
    const std::string p = absl::StrCat("blk.", il, ".");
    L.n_head_kv = static_cast<int32_t>(kv_heads);
    L.n_ff = n_ff[il];
    CAIRN_LOAD_ASSIGN(L.attn_norm, LoadVector(m, p + "attn_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, LoadVector(m, p + "ffn_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.wq, LoadMatrix(m, p + "attn_q.weight", hp_.n_embd, q_dim));
    CAIRN_LOAD_ASSIGN(L.wk, LoadMatrix(m, p + "attn_k.weight", hp_.n_embd, k_dim));
    CAIRN_LOAD_ASSIGN(L.wv, LoadMatrix(m, p + "attn_v.weight", hp_.n_embd, v_dim));
    CAIRN_LOAD_ASSIGN(L.wo, LoadMatrix(m, p + "attn_output.weight", o_dim, hp_.n_embd));
    CAIRN_LOAD_ASSIGN(L.gate, LoadMatrix(m, p + "ffn_gate.weight", hp_.n_embd, L.n_ff));
    CAIRN_LOAD_ASSIGN(L.up, LoadMatrix(m, p + "ffn_up.weight", hp_.n_embd, L.n_ff));
    CAIRN_LOAD_ASSIGN(L.down, LoadMatrix(m, p + "ffn_down.weight", L.n_ff, hp_.n_embd));
    const bool qkv_bias_required = hp_.arch == Arch::kQwen2;
    CAIRN_LOAD_ASSIGN(L.bq, LoadVector(m, p + "attn_q.bias", q_dim, qkv_bias_required));
    CAIRN_LOAD_ASSIGN(L.bk, LoadVector(m, p + "attn_k.bias", k_dim, qkv_bias_required));
    CAIRN_LOAD_ASSIGN(L.bv, LoadVector(m, p + "attn_v.bias", v_dim, qkv_bias_required));
    CAIRN_LOAD_ASSIGN(L.bo, LoadVector(m, p + "attn_output.bias", hp_.n_embd, false));
    const bool qk_norm = hp_.arch == Arch::kQwen3;
    CAIRN_LOAD_ASSIGN(L.q_norm, LoadVector(m, p + "attn_q_norm.weight", hp_.head_dim_k, qk_norm));
    CAIRN_LOAD_ASSIGN(L.k_norm, LoadVector(m, p + "attn_k_norm.weight", hp_.head_dim_k, qk_norm));
    weight_bytes += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wo.bytes() + L.gate.bytes() + L.up.bytes() +
                    L.down.bytes();
  }

  geometry_.n_layers = hp_.n_layer;
  geometry_.k_dim = k_dim;
  geometry_.v_dim = v_dim;
  geometry_.capacity = options.max_context > 0 ? options.max_context : hp_.n_ctx_train;
  uint64_t layout = ModelFingerprint(m);
  layout = FingerprintMix(layout, "cairn-kv-f32-v1", 15);
  layout = FingerprintMix(layout, hp_.n_layer);
  layout = FingerprintMix(layout, k_dim);
  layout = FingerprintMix(layout, v_dim);
  geometry_.layout = layout;

  info_.name = options.name.empty() ? std::filesystem::path(m.path()).stem().string() : options.name;
  info_.arch = hp_.arch_name;
  info_.family = kTransformerFamily;
  info_.n_vocab = hp_.n_vocab;
  info_.n_ctx_train = hp_.n_ctx_train;
  info_.n_embd = static_cast<int32_t>(hp_.n_embd);
  info_.accepts_embeddings = false;
  info_.caps.truncatable = true;
  info_.caps.rollback_window = 0;
  info_.caps.rollback_slack = std::numeric_limits<Pos>::max();
  info_.caps.has_checkpoint_state = false;
  info_.weight_bytes = weight_bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> TransformerBackend::Create(std::shared_ptr<const ModelFile> model,
                                                                    const BackendOptions& options) {
  if (!model) return absl::InvalidArgumentError("no model");
  std::unique_ptr<TransformerBackend> b(new TransformerBackend(std::move(model), options.n_threads));
  if (absl::Status s = b->Load(options); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

absl::StatusOr<std::unique_ptr<SequenceMemory>> TransformerBackend::NewSequence() {
  return std::unique_ptr<SequenceMemory>(new KvMemory(geometry_, this));
}

absl::Status TransformerBackend::Validate(std::span<const SequenceRun> batch) const {
  const ForwardRules rules{info_.n_vocab, false, false, geometry_.capacity};
  return ValidateForwardBatch(batch, rules, [this](const SequenceMemory& m) {
    auto* kv = dynamic_cast<const KvMemory*>(&m);
    return kv != nullptr && kv->owner() == this;
  });
}

absl::StatusOr<std::vector<RunLogits>> TransformerBackend::Forward(std::span<const SequenceRun> batch) {
  std::lock_guard<std::mutex> lock(forward_mu_);
  if (absl::Status s = Validate(batch); !s.ok()) return s;
  std::vector<KvMemory*> mems(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) {
    mems[r] = static_cast<KvMemory*>(batch[r].memory);
    // Growing storage does not change what is absorbed: safe before compute.
    if (absl::Status s = mems[r]->Reserve(batch[r].start_pos + static_cast<Pos>(batch[r].tokens.size()));
        !s.ok()) {
      return s;
    }
  }

  // Rows of all runs are stacked so every matrix is read once per step.
  std::vector<int64_t> offset(batch.size() + 1, 0);
  for (size_t r = 0; r < batch.size(); ++r) offset[r + 1] = offset[r] + static_cast<int64_t>(batch[r].tokens.size());
  const int64_t T = offset.back();
  const int64_t E = hp_.n_embd;
  const int64_t q_dim = static_cast<int64_t>(hp_.n_head) * hp_.head_dim_k;
  const int64_t k_dim = geometry_.k_dim, v_dim = geometry_.v_dim;
  const int64_t o_dim = static_cast<int64_t>(hp_.n_head) * hp_.head_dim_v;
  int64_t max_ff = 0;
  for (const LayerWeights& L : layers_) max_ff = std::max(max_ff, L.n_ff);

  std::vector<int32_t> pos(T);
  std::vector<int32_t> row_run(T);
  for (size_t r = 0; r < batch.size(); ++r) {
    for (int64_t i = offset[r]; i < offset[r + 1]; ++i) {
      pos[i] = batch[r].start_pos + static_cast<int32_t>(i - offset[r]);
      row_run[i] = static_cast<int32_t>(r);
    }
  }

  std::vector<float> x(T * E), xn(T * E), q(T * q_dim), k(T * k_dim), vv(T * v_dim), attn(T * o_dim),
      proj(T * E), gate(T * max_ff), up(T * max_ff);

  const size_t embd_row_bytes = RowBytes(tok_embd_->type, E);
  pool_.ForEach(T, [&](int64_t i) {
    const TokenId t = batch[row_run[i]].tokens[i - offset[row_run[i]]];
    DequantizeRow(tok_embd_->type, tok_embd_->data + static_cast<size_t>(t) * embd_row_bytes, &x[i * E], E);
  });

  // cos/sin per row, shared by every layer.
  const int32_t n_dims = hp_.rope.n_dims;
  std::vector<float> rope_cache(T * n_dims);
  pool_.ForEach(T, [&](int64_t i) { RopeCache(hp_.rope, static_cast<float>(pos[i]), &rope_cache[i * n_dims]); });

  const int32_t n_head_kv = static_cast<int32_t>(k_dim / hp_.head_dim_k);
  AttentionParams ap;
  ap.n_head = hp_.n_head;
  ap.n_head_kv = n_head_kv;
  ap.head_dim_k = hp_.head_dim_k;
  ap.head_dim_v = hp_.head_dim_v;
  ap.scale = hp_.kq_scale;

  // Rows whose logits are wanted, ascending within each run (validated).
  std::vector<int64_t> wanted;
  std::vector<int64_t> wanted_offset(batch.size() + 1, 0);
  for (size_t r = 0; r < batch.size(); ++r) {
    for (int32_t row : batch[r].logit_rows) wanted.push_back(offset[r] + row);
    wanted_offset[r + 1] = static_cast<int64_t>(wanted.size());
  }
  const int64_t W = static_cast<int64_t>(wanted.size());

  auto add_bias = [&](std::vector<float>& y, const std::vector<float>& b, int64_t width) {
    if (b.empty()) return;
    pool_.ForEach(T, [&](int64_t i) { AddF32(&y[i * width], b.data(), &y[i * width], width); });
  };

  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& L = layers_[il];
    pool_.ForEach(T, [&](int64_t i) { RmsNorm(&x[i * E], L.attn_norm.data(), E, hp_.eps, &xn[i * E]); });
    MatMul(L.wq, xn.data(), T, q.data(), pool_);
    MatMul(L.wk, xn.data(), T, k.data(), pool_);
    MatMul(L.wv, xn.data(), T, vv.data(), pool_);
    add_bias(q, L.bq, q_dim);
    add_bias(k, L.bk, k_dim);
    add_bias(vv, L.bv, v_dim);
    pool_.ForEach(T, [&](int64_t i) {
      float* qi = &q[i * q_dim];
      float* ki = &k[i * k_dim];
      if (!L.q_norm.empty()) RmsNormRows(qi, L.q_norm.data(), hp_.n_head, hp_.head_dim_k, hp_.head_dim_k, hp_.eps, qi);
      if (!L.k_norm.empty()) RmsNormRows(ki, L.k_norm.data(), n_head_kv, hp_.head_dim_k, hp_.head_dim_k, hp_.eps, ki);
      RopeApply(hp_.rope, &rope_cache[i * n_dims], qi, hp_.n_head, hp_.head_dim_k);
      RopeApply(hp_.rope, &rope_cache[i * n_dims], ki, n_head_kv, hp_.head_dim_k);
      // Into the sequence's cache at its position.
      KvMemory* mem = mems[row_run[i]];
      std::copy_n(ki, k_dim, mem->k(il) + static_cast<int64_t>(pos[i]) * k_dim);
      std::copy_n(&vv[i * v_dim], v_dim, mem->v(il) + static_cast<int64_t>(pos[i]) * v_dim);
    });
    // The last layer's output feeds only the logits: from here on it works
    // on the wanted rows alone (their K/V rows above were stored for all).
    const bool last = il == hp_.n_layer - 1;
    const int64_t R = last ? W : T;
    for (size_t r = 0; r < batch.size(); ++r) {
      const int64_t n = last ? wanted_offset[r + 1] - wanted_offset[r] : offset[r + 1] - offset[r];
      if (n == 0) continue;
      std::vector<int32_t> kv_end(n), q_pos(n);
      std::vector<float> q_rows;
      const float* q_base = &q[offset[r] * q_dim];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = last ? wanted[wanted_offset[r] + i] : offset[r] + i;
        q_pos[i] = pos[row];
        kv_end[i] = pos[row] + 1;
      }
      if (last) {
        q_rows.resize(n * q_dim);
        for (int64_t i = 0; i < n; ++i) std::copy_n(&q[wanted[wanted_offset[r] + i] * q_dim], q_dim, &q_rows[i * q_dim]);
        q_base = q_rows.data();
      }
      AttentionArgs aa;
      aa.q = q_base;
      aa.q_stride = q_dim;
      aa.n_q = n;
      aa.kv_end = kv_end.data();
      aa.q_pos = q_pos.data();
      aa.k = mems[r]->k(il);
      aa.k_stride = k_dim;
      aa.v = mems[r]->v(il);
      aa.v_stride = v_dim;
      aa.n_kv = batch[r].start_pos + static_cast<int64_t>(batch[r].tokens.size());
      aa.out = &attn[(last ? wanted_offset[r] : offset[r]) * o_dim];
      aa.out_stride = o_dim;
      Attention(ap, aa, pool_);
    }
    if (last && R != T) {
      // Residual rows of the wanted tokens, compacted in place (ascending).
      for (int64_t j = 0; j < W; ++j) {
        if (wanted[j] != j) std::copy_n(&x[wanted[j] * E], E, &x[j * E]);
      }
    }
    if (R == 0) break;
    MatMul(L.wo, attn.data(), R, proj.data(), pool_);
    if (!L.bo.empty()) {
      pool_.ForEach(R, [&](int64_t i) { AddF32(&proj[i * E], L.bo.data(), &proj[i * E], E); });
    }
    pool_.ForEach(R, [&](int64_t i) {
      AddF32(&x[i * E], &proj[i * E], &x[i * E], E);
      RmsNorm(&x[i * E], L.ffn_norm.data(), E, hp_.eps, &xn[i * E]);
    });
    const int64_t F = L.n_ff;
    MatMul(L.gate, xn.data(), R, gate.data(), pool_);
    MatMul(L.up, xn.data(), R, up.data(), pool_);
    pool_.ForEach(R, [&](int64_t i) { SwiGlu(&gate[i * F], &up[i * F], F, &gate[i * F]); });
    MatMul(L.down, gate.data(), R, proj.data(), pool_);
    pool_.ForEach(R, [&](int64_t i) { AddF32(&x[i * E], &proj[i * E], &x[i * E], E); });
  }

  // x now holds the W wanted rows, in order.
  std::vector<float> hn(W * E), logits(W * hp_.n_vocab);
  pool_.ForEach(W, [&](int64_t j) { RmsNorm(&x[j * E], output_norm_.data(), E, hp_.eps, &hn[j * E]); });
  MatMul(output_, hn.data(), W, logits.data(), pool_);

  std::vector<RunLogits> out(batch.size());
  int64_t j = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    RunLogits& rl = out[r];
    rl.n_rows = static_cast<int32_t>(batch[r].logit_rows.size());
    rl.n_vocab = hp_.n_vocab;
    rl.values.assign(logits.begin() + j * hp_.n_vocab, logits.begin() + (j + rl.n_rows) * hp_.n_vocab);
    j += rl.n_rows;
    mems[r]->SetNextPos(batch[r].start_pos + static_cast<Pos>(batch[r].tokens.size()));
  }
  return out;
}

}  // namespace

std::vector<std::string> TransformerArchs() { return {"llama", "qwen2", "qwen3"}; }

absl::StatusOr<std::unique_ptr<Backend>> CreateTransformerBackend(std::shared_ptr<const ModelFile> model,
                                                                  const BackendOptions& options) {
  return TransformerBackend::Create(std::move(model), options);
}

absl::Status RegisterTransformerFamily(BackendRegistry& registry) {
  return registry.Register(kTransformerFamily, TransformerArchs(), &CreateTransformerBackend);
}

}  // namespace cairn
