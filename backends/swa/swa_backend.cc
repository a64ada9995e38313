#include "backends/swa/swa_backend.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <mutex>

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
#include "backends/swa/swa_memory.h"
#include "backends/transformer/kv_memory.h"

namespace cairn {
namespace {

enum class Arch { kGemma3, kGemma2 };

struct LayerWeights {
  bool local = false;
  int32_t slot = 0;  // index among the global or among the local layers
  std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;
  std::vector<float> q_norm, k_norm;  // gemma3
  WeightMatrix wq, wk, wv, wo, gate, up, down;
  int64_t n_ff = 0;
};

struct HParams {
  Arch arch = Arch::kGemma3;
  std::string arch_name;
  int64_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t window = 0;  // 0: no local layers
  float eps = 1e-6f;
  float kq_scale = 1.0f;
  float attn_softcap = 0.0f;   // 0: none
  float final_softcap = 0.0f;  // 0: none
  float embd_scale = 1.0f;
  RopeParams rope_global, rope_local;
};

class SwaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(std::shared_ptr<const ModelFile> model,
                                                         const BackendOptions& options, const SwaOptions& swa);

  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override;
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override;

 private:
  SwaBackend(std::shared_ptr<const ModelFile> model, int n_threads) : model_(std::move(model)), pool_(n_threads) {}
  absl::Status Load(const BackendOptions& options, const SwaOptions& swa);
  absl::Status Validate(std::span<const SequenceRun> batch) const;

  std::shared_ptr<const ModelFile> model_;
  ThreadPool pool_;
  std::mutex forward_mu_;  // Forward uses every pool thread: one call at a time
  ModelInfo info_;
  HParams hp_;
  SwaGeometry geometry_;
  const TensorInfo* tok_embd_ = nullptr;
  std::vector<float> output_norm_;
  WeightMatrix output_;
  std::vector<LayerWeights> layers_;
};

absl::Status SwaBackend::Load(const BackendOptions& options, const SwaOptions& swa) {
  const Metadata& md = model_->metadata();
  const ModelFile& m = *model_;
  CAIRN_LOAD_ASSIGN_MD(hp_.arch_name, m.Architecture(), model_->path());
  if (hp_.arch_name == "gemma3") {
    hp_.arch = Arch::kGemma3;
  } else if (hp_.arch_name == "gemma2") {
    hp_.arch = Arch::kGemma2;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("architecture '", hp_.arch_name, "' is not served by the sliding-window family"));
  }
  if (swa.rollback_slack <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("rollback slack must be positive, got ", swa.rollback_slack));
  }
  const bool gemma3 = hp_.arch == Arch::kGemma3;
  const std::string a = hp_.arch_name + ".";

  int64_t v = 0;
  CAIRN_LOAD_ASSIGN_MD(hp_.n_embd, md.GetInt(a + "embedding_length"), model_->path());
  CAIRN_LOAD_ASSIGN_MD(v, md.GetInt(a + "block_count"), model_->path());
  hp_.n_layer = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetInt(a + "attention.head_count"), model_->path());
  hp_.n_head = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "context_length", 8192), model_->path());
  hp_.n_ctx_train = static_cast<int32_t>(v);
  if (hp_.n_embd <= 0 || hp_.n_layer <= 0 || hp_.n_head <= 0 || hp_.n_ctx_train <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", m.path(), "': non-positive embedding_length, block_count, head_count or context_length"));
  }
  std::vector<int64_t> n_head_kv, n_ff;
  CAIRN_LOAD_ASSIGN_MD(n_head_kv, PerLayer(md, a + "attention.head_count_kv", hp_.n_layer), model_->path());
  CAIRN_LOAD_ASSIGN_MD(n_ff, PerLayer(md, a + "feed_forward_length", hp_.n_layer), model_->path());
  for (int64_t h : n_head_kv) {
    if (h != n_head_kv[0] || h <= 0 || hp_.n_head % h != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", m.path(), "': head_count_kv must be one positive divisor of head_count"));
    }
  }
  hp_.n_head_kv = static_cast<int32_t>(n_head_kv[0]);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "attention.key_length", hp_.n_embd / hp_.n_head), model_->path());
  hp_.head_dim_k = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "attention.value_length", hp_.head_dim_k), model_->path());
  hp_.head_dim_v = static_cast<int32_t>(v);
  if (hp_.head_dim_k <= 0 || hp_.head_dim_v <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': non-positive key/value length"));
  }
  double f = 0;
  CAIRN_LOAD_ASSIGN_MD(f, md.GetFloat(a + "attention.layer_norm_rms_epsilon"), model_->path());
  hp_.eps = static_cast<float>(f);

  // Sliding window and the local/global pattern (llama.cpp: layer il is
  // local iff il % P < P - 1, P == 0 meaning every layer).
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "attention.sliding_window", gemma3 ? 0 : 4096), model_->path());
  if (v < 0 || v > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': sliding_window ", v, " is out of range"));
  }
  hp_.window = static_cast<int32_t>(v);
  std::vector<bool> local(hp_.n_layer, false);
  if (hp_.window > 0) {
    const std::string key = a + "attention.sliding_window_pattern";
    const MetadataValue* pv = md.Find(key);
    if (pv && pv->is_array()) {
      // A per-layer array: nonzero marks a sliding-window layer.
      std::vector<int64_t> flags;
      CAIRN_LOAD_ASSIGN_MD(flags, PerLayer(md, key, hp_.n_layer), model_->path());
      for (int32_t il = 0; il < hp_.n_layer; ++il) local[il] = flags[il] != 0;
    } else {
      int64_t period = 0;
      CAIRN_LOAD_ASSIGN_MD(period, md.GetIntOr(key, gemma3 ? 6 : 2), model_->path());
      if (period < 0) {
        return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': negative sliding_window_pattern"));
      }
      for (int32_t il = 0; il < hp_.n_layer; ++il) local[il] = period == 0 || il % period < period - 1;
    }
  }

  // RoPE: NEOX pairing; global layers with the file's base and linear
  // scaling, local layers with the SWA base (gemma3: unscaled).
  RopeParams& rg = hp_.rope_global;
  rg.type = RopeType::kNeox;
  CAIRN_LOAD_ASSIGN_MD(v, md.GetIntOr(a + "rope.dimension_count", hp_.head_dim_k), model_->path());
  rg.n_dims = static_cast<int32_t>(v);
  if (rg.n_dims <= 0 || rg.n_dims > hp_.head_dim_k || rg.n_dims % 2) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': rope.dimension_count ", rg.n_dims,
                                                   " does not fit head dim ", hp_.head_dim_k));
  }
  CAIRN_LOAD_ASSIGN_MD(f, md.GetFloatOr(a + "rope.freq_base", 10000.0), model_->path());
  rg.freq_base = static_cast<float>(f);
  std::string scaling;
  CAIRN_LOAD_ASSIGN_MD(scaling, md.GetStringOr(a + "rope.scaling.type", "linear"), model_->path());
  if (scaling != "linear" && scaling != "none") {
    return absl::UnimplementedError(
        absl::StrCat("model '", m.path(), "': rope scaling '", scaling, "' is not supported (linear, none)"));
  }
  double factor = 0;
  CAIRN_LOAD_ASSIGN_MD(factor, md.GetFloatOr(a + "rope.scaling.factor", 0.0), model_->path());
  // Older files.
  if (factor == 0.0) CAIRN_LOAD_ASSIGN_MD(factor, md.GetFloatOr(a + "rope.scale_linear", 0.0), model_->path());
  if (factor < 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': negative rope scaling factor"));
  }
  rg.freq_scale = (scaling == "none" || factor == 0.0) ? 1.0f : static_cast<float>(1.0 / factor);
  hp_.rope_local = rg;
  CAIRN_LOAD_ASSIGN_MD(f, md.GetFloatOr(a + "rope.freq_base_swa", gemma3 ? 10000.0 : rg.freq_base), model_->path());
  hp_.rope_local.freq_base = static_cast<float>(f);
  if (gemma3) hp_.rope_local.freq_scale = 1.0f;

  // Scales. The 27B variants scale queries by 1/sqrt(n_embd / n_head)
  // (query_pre_attn_scalar), recognized by layer count as llama.cpp does.
  const bool is_27b = hp_.n_layer == (gemma3 ? 62 : 46);
  hp_.kq_scale = is_27b ? 1.0f / std::sqrt(static_cast<float>(hp_.n_embd / hp_.n_head))
                        : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));
  if (!gemma3) {
    CAIRN_LOAD_ASSIGN_MD(f, md.GetFloatOr(a + "attn_logit_softcapping", 50.0), model_->path());
    hp_.attn_softcap = static_cast<float>(f);
  }
  CAIRN_LOAD_ASSIGN_MD(f, md.GetFloatOr(a + "final_logit_softcapping", gemma3 ? 0.0 : 30.0), model_->path());
  hp_.final_softcap = static_cast<float>(f);
  if (hp_.attn_softcap < 0 || hp_.final_softcap < 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': negative logit soft cap"));
  }
  hp_.embd_scale = std::sqrt(static_cast<float>(hp_.n_embd));

  // Tensors.
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
  const int64_t k_dim = static_cast<int64_t>(hp_.n_head_kv) * hp_.head_dim_k;
  const int64_t v_dim = static_cast<int64_t>(hp_.n_head_kv) * hp_.head_dim_v;
  const int64_t o_dim = static_cast<int64_t>(hp_.n_head) * hp_.head_dim_v;
  size_t weight_bytes = output_.bytes();
  int32_t n_local = 0, n_global = 0;
  layers_.resize(hp_.n_layer);
  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& L = layers_[il];
    const std::string p = absl::StrCat("blk.", il, ".");
    L.local = local[il];
    L.slot = L.local ? n_local++ : n_global++;
    L.n_ff = n_ff[il];
    if (L.n_ff <= 0) return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': layer ", il, " has no FFN"));
    CAIRN_LOAD_ASSIGN(L.attn_norm, LoadVector(m, p + "attn_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.post_attn_norm, LoadVector(m, p + "post_attention_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, LoadVector(m, p + "ffn_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.post_ffn_norm, LoadVector(m, p + "post_ffw_norm.weight", hp_.n_embd, true));
    CAIRN_LOAD_ASSIGN(L.q_norm, LoadVector(m, p + "attn_q_norm.weight", hp_.head_dim_k, gemma3));
    CAIRN_LOAD_ASSIGN(L.k_norm, LoadVector(m, p + "attn_k_norm.weight", hp_.head_dim_k, gemma3));
    CAIRN_LOAD_ASSIGN(L.wq, LoadMatrix(m, p + "attn_q.weight", hp_.n_embd, q_dim));
    CAIRN_LOAD_ASSIGN(L.wk, LoadMatrix(m, p + "attn_k.weight", hp_.n_embd, k_dim));
    CAIRN_LOAD_ASSIGN(L.wv, LoadMatrix(m, p + "attn_v.weight", hp_.n_embd, v_dim));
    CAIRN_LOAD_ASSIGN(L.wo, LoadMatrix(m, p + "attn_output.weight", o_dim, hp_.n_embd));
    CAIRN_LOAD_ASSIGN(L.gate, LoadMatrix(m, p + "ffn_gate.weight", hp_.n_embd, L.n_ff));
    CAIRN_LOAD_ASSIGN(L.up, LoadMatrix(m, p + "ffn_up.weight", hp_.n_embd, L.n_ff));
    CAIRN_LOAD_ASSIGN(L.down, LoadMatrix(m, p + "ffn_down.weight", L.n_ff, hp_.n_embd));
    weight_bytes += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wo.bytes() + L.gate.bytes() + L.up.bytes() +
                    L.down.bytes();
  }

  geometry_.n_global = n_global;
  geometry_.n_local = n_local;
  geometry_.k_dim = k_dim;
  geometry_.v_dim = v_dim;
  geometry_.capacity = options.max_context > 0 ? options.max_context : hp_.n_ctx_train;
  geometry_.window = std::max<int32_t>(hp_.window, 1);
  // W - 1 rows serve the next query; the slack is what Truncate can give back.
  const int64_t ring = static_cast<int64_t>(geometry_.window) - 1 + swa.rollback_slack;
  geometry_.ring_rows = static_cast<Pos>(std::min<int64_t>(ring, std::max<Pos>(geometry_.capacity, 1)));
  uint64_t layout = ModelFingerprint(m);
  layout = FingerprintMix(layout, "cairn-swa-f32-v1", 16);
  for (int64_t x : {int64_t{n_global}, int64_t{n_local}, k_dim, v_dim, int64_t{geometry_.window},
                    int64_t{geometry_.ring_rows}}) {
    layout = FingerprintMix(layout, x);
  }
  geometry_.layout = layout;

  info_.name = options.name.empty() ? std::filesystem::path(m.path()).stem().string() : options.name;
  info_.arch = hp_.arch_name;
  info_.family = kSwaFamily;
  info_.n_vocab = hp_.n_vocab;
  info_.n_ctx_train = hp_.n_ctx_train;
  info_.n_embd = static_cast<int32_t>(hp_.n_embd);
  info_.accepts_embeddings = false;
  info_.caps = SwaMemory(geometry_, this).caps();
  info_.weight_bytes = weight_bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> SwaBackend::Create(std::shared_ptr<const ModelFile> model,
                                                            const BackendOptions& options, const SwaOptions& swa) {
  if (!model) return absl::InvalidArgumentError("no model");
  std::unique_ptr<SwaBackend> b(new SwaBackend(std::move(model), options.n_threads));
  if (absl::Status s = b->Load(options, swa); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

absl::StatusOr<std::unique_ptr<SequenceMemory>> SwaBackend::NewSequence() {
  return std::unique_ptr<SequenceMemory>(new SwaMemory(geometry_, this));
}

absl::Status SwaBackend::Validate(std::span<const SequenceRun> batch) const {
  const ForwardRules rules{info_.n_vocab, false, false, geometry_.capacity};
  return ValidateForwardBatch(batch, rules, [this](const SequenceMemory& m) {
    auto* swa = dynamic_cast<const SwaMemory*>(&m);
    return swa != nullptr && swa->owner() == this;
  });
}

absl::StatusOr<std::vector<RunLogits>> SwaBackend::Forward(std::span<const SequenceRun> batch) {
  std::lock_guard<std::mutex> lock(forward_mu_);
  if (absl::Status s = Validate(batch); !s.ok()) return s;
  std::vector<SwaMemory*> mems(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) {
    mems[r] = static_cast<SwaMemory*>(batch[r].memory);
    // Growing storage does not change what is absorbed: safe before compute.
    if (absl::Status s = mems[r]->Reserve(batch[r].start_pos + static_cast<Pos>(batch[r].tokens.size())); !s.ok()) {
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
  const int32_t W = geometry_.window;
  const Pos R = geometry_.ring_rows;
  int64_t max_ff = 0;
  for (const LayerWeights& L : layers_) max_ff = std::max(max_ff, L.n_ff);

  std::vector<int32_t> pos(T), row_run(T);
  for (size_t r = 0; r < batch.size(); ++r) {
    for (int64_t i = offset[r]; i < offset[r + 1]; ++i) {
      pos[i] = batch[r].start_pos + static_cast<int32_t>(i - offset[r]);
      row_run[i] = static_cast<int32_t>(r);
    }
  }

  std::vector<float> x(T * E), xn(T * E), q(T * q_dim), k(T * k_dim), vv(T * v_dim), attn(T * o_dim), proj(T * E),
      gate(T * max_ff), up(T * max_ff);

  // Gemma scales token embeddings by sqrt(n_embd).
  const size_t embd_row_bytes = RowBytes(tok_embd_->type, E);
  pool_.ForEach(T, [&](int64_t i) {
    const TokenId t = batch[row_run[i]].tokens[i - offset[row_run[i]]];
    float* xi = &x[i * E];
    DequantizeRow(tok_embd_->type, tok_embd_->data + static_cast<size_t>(t) * embd_row_bytes, xi, E);
    for (int64_t e = 0; e < E; ++e) xi[e] *= hp_.embd_scale;
  });

  // cos/sin per row for each kind of layer present, shared across layers.
  const int32_t n_dims = hp_.rope_global.n_dims;
  std::vector<float> rope_global, rope_local;
  if (geometry_.n_global > 0) {
    rope_global.resize(T * n_dims);
    pool_.ForEach(T, [&](int64_t i) { RopeCache(hp_.rope_global, static_cast<float>(pos[i]), &rope_global[i * n_dims]); });
  }
  if (geometry_.n_local > 0) {
    rope_local.resize(T * n_dims);
    pool_.ForEach(T, [&](int64_t i) { RopeCache(hp_.rope_local, static_cast<float>(pos[i]), &rope_local[i * n_dims]); });
  }

  AttentionParams ap;
  ap.n_head = hp_.n_head;
  ap.n_head_kv = hp_.n_head_kv;
  ap.head_dim_k = hp_.head_dim_k;
  ap.head_dim_v = hp_.head_dim_v;
  ap.scale = hp_.kq_scale;
  ap.softcap = hp_.attn_softcap;

  // Per-run scratch for local layers: the W - 1 ring rows before the run
  // followed by the run's new rows, in position order.
  std::vector<float> ctx_k, ctx_v;
  std::vector<int32_t> kv_pos, kv_begin, kv_end;

  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& L = layers_[il];
    const std::vector<float>& rope_cache = L.local ? rope_local : rope_global;
    const RopeParams& rope = L.local ? hp_.rope_local : hp_.rope_global;
    pool_.ForEach(T, [&](int64_t i) { RmsNorm(&x[i * E], L.attn_norm.data(), E, hp_.eps, &xn[i * E]); });
    MatMul(L.wq, xn.data(), T, q.data(), pool_);
    MatMul(L.wk, xn.data(), T, k.data(), pool_);
    MatMul(L.wv, xn.data(), T, vv.data(), pool_);
    pool_.ForEach(T, [&](int64_t i) {
      float* qi = &q[i * q_dim];
      float* ki = &k[i * k_dim];
      if (!L.q_norm.empty()) RmsNormRows(qi, L.q_norm.data(), hp_.n_head, hp_.head_dim_k, hp_.head_dim_k, hp_.eps, qi);
      if (!L.k_norm.empty()) {
        RmsNormRows(ki, L.k_norm.data(), hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_k, hp_.eps, ki);
      }
      RopeApply(rope, &rope_cache[i * n_dims], qi, hp_.n_head, hp_.head_dim_k);
      RopeApply(rope, &rope_cache[i * n_dims], ki, hp_.n_head_kv, hp_.head_dim_k);
      if (!L.local) {
        SwaMemory* mem = mems[row_run[i]];
        std::copy_n(ki, k_dim, mem->global_k(L.slot) + static_cast<int64_t>(pos[i]) * k_dim);
        std::copy_n(&vv[i * v_dim], v_dim, mem->global_v(L.slot) + static_cast<int64_t>(pos[i]) * v_dim);
      }
    });
    for (size_t r = 0; r < batch.size(); ++r) {
      SwaMemory* mem = mems[r];
      const Pos p0 = batch[r].start_pos;
      const int64_t n = offset[r + 1] - offset[r];
      AttentionArgs aa;
      aa.q = &q[offset[r] * q_dim];
      aa.q_stride = q_dim;
      aa.n_q = n;
      aa.q_pos = &pos[offset[r]];
      aa.out = &attn[offset[r] * o_dim];
      aa.out_stride = o_dim;
      kv_end.resize(n);
      if (!L.local) {
        for (int64_t i = 0; i < n; ++i) kv_end[i] = p0 + static_cast<int32_t>(i) + 1;
        aa.kv_end = kv_end.data();
        aa.k = mem->global_k(L.slot);
        aa.k_stride = k_dim;
        aa.v = mem->global_v(L.slot);
        aa.v_stride = v_dim;
        aa.n_kv = p0 + n;
        ap.window = 0;
        Attention(ap, aa, pool_);
        continue;
      }
      // Local layer: the run needs the history p0 - h .. p0 - 1 (h <= W - 1,
      // all held: Truncate and the ring size guarantee it) and its new rows.
      const int64_t h = std::min<int64_t>(W - 1, p0);
      kv_begin.resize(n);
      if (n <= R - h) {
        // The new rows fit in the ring without overwriting that history
        // (position p0 + i replaces p0 + i - R < p0 - h): write them first and
        // attend over the ring in place, logical row = position.
        for (int64_t i = 0; i < n; ++i) {
          const Pos p = static_cast<Pos>(p0 + i);
          std::copy_n(&k[(offset[r] + i) * k_dim], k_dim, mem->ring_k(L.slot, p));
          std::copy_n(&vv[(offset[r] + i) * v_dim], v_dim, mem->ring_v(L.slot, p));
        }
        for (int64_t i = 0; i < n; ++i) {
          kv_end[i] = static_cast<int32_t>(p0 + i + 1);
          kv_begin[i] = static_cast<int32_t>(std::max<int64_t>(0, p0 + i + 1 - W));  // keys p - W + 1 .. p
        }
        aa.kv_end = kv_end.data();
        aa.kv_begin = kv_begin.data();
        aa.k = mem->ring_k(L.slot, 0);
        aa.k_stride = k_dim;
        aa.v = mem->ring_v(L.slot, 0);
        aa.v_stride = v_dim;
        aa.n_kv = p0 + n;
        aa.kv_wrap = R;
        ap.window = 0;  // kv_begin is the window
        Attention(ap, aa, pool_);
        continue;
      }
      // A run longer than the ring's slack: gather the history and the new
      // rows in position order, attend, then keep the last R rows.
      const int64_t rows = h + n;
      ctx_k.resize(rows * k_dim);
      ctx_v.resize(rows * v_dim);
      kv_pos.resize(rows);
      for (int64_t j = 0; j < h; ++j) {
        const Pos p = static_cast<Pos>(p0 - h + j);
        std::copy_n(mem->ring_k(L.slot, p), k_dim, &ctx_k[j * k_dim]);
        std::copy_n(mem->ring_v(L.slot, p), v_dim, &ctx_v[j * v_dim]);
      }
      std::copy_n(&k[offset[r] * k_dim], n * k_dim, &ctx_k[h * k_dim]);
      std::copy_n(&vv[offset[r] * v_dim], n * v_dim, &ctx_v[h * v_dim]);
      for (int64_t j = 0; j < rows; ++j) kv_pos[j] = static_cast<int32_t>(p0 - h + j);
      for (int64_t i = 0; i < n; ++i) {
        kv_end[i] = static_cast<int32_t>(h + i + 1);
        kv_begin[i] = static_cast<int32_t>(std::max<int64_t>(0, h + i + 1 - W));  // keys p - W + 1 .. p
      }
      aa.kv_end = kv_end.data();
      aa.kv_begin = kv_begin.data();
      aa.k = ctx_k.data();
      aa.k_stride = k_dim;
      aa.v = ctx_v.data();
      aa.v_stride = v_dim;
      aa.kv_pos = kv_pos.data();
      aa.n_kv = rows;
      ap.window = W;
      Attention(ap, aa, pool_);
      // Only the last R positions fit in the ring; older ones of a long run
      // were needed by this run alone.
      for (int64_t i = std::max<int64_t>(0, n - R); i < n; ++i) {
        const Pos p = static_cast<Pos>(p0 + i);
        std::copy_n(&k[(offset[r] + i) * k_dim], k_dim, mem->ring_k(L.slot, p));
        std::copy_n(&vv[(offset[r] + i) * v_dim], v_dim, mem->ring_v(L.slot, p));
      }
    }
    // Sandwich norms: the attention output is normalized before the residual
    // add, and so is the FFN output.
    MatMul(L.wo, attn.data(), T, proj.data(), pool_);
    pool_.ForEach(T, [&](int64_t i) {
      RmsNorm(&proj[i * E], L.post_attn_norm.data(), E, hp_.eps, &proj[i * E]);
      AddF32(&x[i * E], &proj[i * E], &x[i * E], E);
      RmsNorm(&x[i * E], L.ffn_norm.data(), E, hp_.eps, &xn[i * E]);
    });
    const int64_t F = L.n_ff;
    MatMul(L.gate, xn.data(), T, gate.data(), pool_);
    MatMul(L.up, xn.data(), T, up.data(), pool_);
    pool_.ForEach(T, [&](int64_t i) { GeGlu(&gate[i * F], &up[i * F], F, &gate[i * F]); });
    MatMul(L.down, gate.data(), T, proj.data(), pool_);
    pool_.ForEach(T, [&](int64_t i) {
      RmsNorm(&proj[i * E], L.post_ffn_norm.data(), E, hp_.eps, &proj[i * E]);
      AddF32(&x[i * E], &proj[i * E], &x[i * E], E);
    });
  }

  // Only the wanted rows go through the output head.
  std::vector<int64_t> wanted;
  for (size_t r = 0; r < batch.size(); ++r) {
    for (int32_t row : batch[r].logit_rows) wanted.push_back(offset[r] + row);
  }
  const int64_t NW = static_cast<int64_t>(wanted.size());
  const int64_t V = hp_.n_vocab;
  std::vector<float> hn(NW * E), logits(NW * V);
  pool_.ForEach(NW, [&](int64_t j) { RmsNorm(&x[wanted[j] * E], output_norm_.data(), E, hp_.eps, &hn[j * E]); });
  MatMul(output_, hn.data(), NW, logits.data(), pool_);
  if (hp_.final_softcap > 0.0f) {
    const float cap = hp_.final_softcap;
    pool_.ForEach(NW, [&](int64_t j) {
      float* l = &logits[j * V];
      for (int64_t t = 0; t < V; ++t) l[t] = cap * std::tanh(l[t] / cap);
    });
  }

  std::vector<RunLogits> out(batch.size());
  int64_t j = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    RunLogits& rl = out[r];
    rl.n_rows = static_cast<int32_t>(batch[r].logit_rows.size());
    rl.n_vocab = hp_.n_vocab;
    rl.values.assign(logits.begin() + j * V, logits.begin() + (j + rl.n_rows) * V);
    j += rl.n_rows;
    mems[r]->Advance(batch[r].start_pos + static_cast<Pos>(batch[r].tokens.size()));
  }
  return out;
}

}  // namespace

std::vector<std::string> SwaArchs() { return {"gemma3", "gemma2"}; }

absl::StatusOr<std::unique_ptr<Backend>> CreateSwaBackend(std::shared_ptr<const ModelFile> model,
                                                          const BackendOptions& options, const SwaOptions& swa_options) {
  return SwaBackend::Create(std::move(model), options, swa_options);
}

absl::Status RegisterSwaFamily(BackendRegistry& registry) {
  return registry.Register(kSwaFamily, SwaArchs(),
                           [](std::shared_ptr<const ModelFile> model, const BackendOptions& options) {
                             return CreateSwaBackend(std::move(model), options);
                           });
}

}  // namespace cairn
