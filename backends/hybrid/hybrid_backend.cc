#include "backends/hybrid/hybrid_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/hybrid/delta_net_mixer.h"
#include "backends/hybrid/hybrid_memory.h"
#include "backends/kernels/activation.h"
#include "backends/kernels/attention.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/norm.h"
#include "backends/kernels/rope.h"
#include "backends/kernels/thread_pool.h"
#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"
#include "backends/model_loading.h"
#include "backends/recurrent/mamba_mixer.h"

namespace cairn {
namespace {

enum class Arch { kGraniteHybrid, kQwen35 };

absl::StatusOr<Arch> ParseArch(const std::string& arch) {
  if (arch == "granitehybrid") return Arch::kGraniteHybrid;
  if (arch == "qwen35") return Arch::kQwen35;
  return absl::InvalidArgumentError(absl::StrCat("architecture '", arch, "' is not served by the hybrid family"));
}

struct Layer {
  bool recurrent = false;
  int32_t part_index = 0;  // index among the attention layers or among the recurrent layers
  std::vector<float> attn_norm, ffn_norm;
  // Attention layers.
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> q_norm, k_norm;
  // Recurrent layers.
  MambaMixerWeights mamba;
  DeltaNetWeights dnet;
  // Feed-forward.
  WeightMatrix gate, up, down;
  int64_t n_ff = 0;
};

struct HParams {
  Arch arch = Arch::kQwen35;
  std::string arch_name;
  int64_t n_embd = 0;
  int32_t n_layer = 0;  // layers run (block_count minus MTP blocks)
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // of the attention layers
  int32_t head_dim = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  float eps = 1e-5f;
  float kq_scale = 1.0f;
  bool rope = false;
  RopeParams rope_params;
  bool imrope = false;
  int32_t sections[4] = {0, 0, 0, 0};
  bool gated_attention = false;  // qwen35: query and gate interleaved per head
  // Granite scales; 0 in the file means "not applied".
  float embedding_scale = 0.0f;
  float residual_scale = 0.0f;
  float logit_scale = 0.0f;
};

class HybridBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(std::shared_ptr<const ModelFile> model,
                                                         const BackendOptions& options);

  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override;
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override;

 private:
  HybridBackend(std::shared_ptr<const ModelFile> model, int n_threads)
      : model_(std::move(model)), pool_(n_threads) {}
  absl::Status Load(const BackendOptions& options);
  absl::Status LoadLayer(int32_t il, bool recurrent, int32_t part_index, int64_t n_ff);
  absl::Status Validate(std::span<const SequenceRun> batch) const;

  std::shared_ptr<const ModelFile> model_;
  ThreadPool pool_;
  std::mutex forward_mu_;  // Forward uses every pool thread: one call at a time
  ModelInfo info_;
  HParams hp_;
  HybridGeometry geometry_;
  MambaGeometry mamba_;        // granitehybrid
  DeltaNetGeometry dnet_;      // qwen35
  const TensorInfo* tok_embd_ = nullptr;
  std::vector<float> output_norm_;
  WeightMatrix output_;
  std::vector<Layer> layers_;
};

absl::Status HybridBackend::LoadLayer(int32_t il, bool recurrent, int32_t part_index, int64_t n_ff) {
  const ModelFile& m = *model_;
  Layer& L = layers_[il];
  L.recurrent = recurrent;
  L.part_index = part_index;
  L.n_ff = n_ff;
  const std::string p = absl::StrCat("blk.", il, ".");
  const int64_t E = hp_.n_embd;
  CAIRN_LOAD_ASSIGN(L.attn_norm, LoadF32(m, p + "attn_norm.weight", {E}, PathInErrors::kYes));
  const char* ffn_norm = hp_.arch == Arch::kQwen35 ? "post_attention_norm.weight" : "ffn_norm.weight";
  CAIRN_LOAD_ASSIGN(L.ffn_norm, LoadF32(m, p + ffn_norm, {E}, PathInErrors::kYes));
  if (m.FindTensor(p + "ffn_gate_inp.weight") != nullptr) {
    // Granite 4.0 H Tiny/Small route tokens to experts; only dense FFNs here.
    return absl::UnimplementedError(absl::StrCat("layer ", il, ": mixture-of-experts FFN (ffn_gate_inp) is not supported"));
  }
  CAIRN_LOAD_ASSIGN(L.gate, LoadShapedMatrix(m, p + "ffn_gate.weight", E, n_ff, PathInErrors::kYes));
  CAIRN_LOAD_ASSIGN(L.up, LoadShapedMatrix(m, p + "ffn_up.weight", E, n_ff, PathInErrors::kYes));
  CAIRN_LOAD_ASSIGN(L.down, LoadShapedMatrix(m, p + "ffn_down.weight", n_ff, E, PathInErrors::kYes));
  if (recurrent) {
    if (hp_.arch == Arch::kGraniteHybrid) {
      CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(m, mamba_, il));
    } else {
      CAIRN_LOAD_ASSIGN(L.dnet, LoadDeltaNet(m, dnet_, il));
    }
    return absl::OkStatus();
  }
  const int64_t hd = hp_.head_dim;
  const int64_t q_dim = static_cast<int64_t>(hp_.n_head) * hd * (hp_.gated_attention ? 2 : 1);
  const int64_t kv_dim = static_cast<int64_t>(hp_.n_head_kv) * hd;
  CAIRN_LOAD_ASSIGN(L.wq, LoadShapedMatrix(m, p + "attn_q.weight", E, q_dim, PathInErrors::kYes));
  CAIRN_LOAD_ASSIGN(L.wk, LoadShapedMatrix(m, p + "attn_k.weight", E, kv_dim, PathInErrors::kYes));
  CAIRN_LOAD_ASSIGN(L.wv, LoadShapedMatrix(m, p + "attn_v.weight", E, kv_dim, PathInErrors::kYes));
  CAIRN_LOAD_ASSIGN(L.wo, LoadShapedMatrix(m, p + "attn_output.weight", static_cast<int64_t>(hp_.n_head) * hd, E,
                                            PathInErrors::kYes));
  if (hp_.arch == Arch::kQwen35) {
    CAIRN_LOAD_ASSIGN(L.q_norm, LoadF32(m, p + "attn_q_norm.weight", {hd}, PathInErrors::kYes));
    CAIRN_LOAD_ASSIGN(L.k_norm, LoadF32(m, p + "attn_k_norm.weight", {hd}, PathInErrors::kYes));
  }
  return absl::OkStatus();
}

absl::Status HybridBackend::Load(const BackendOptions& options) {
  const ModelFile& m = *model_;
  const Metadata& md = m.metadata();
  CAIRN_LOAD_ASSIGN(hp_.arch_name, m.Architecture());
  CAIRN_LOAD_ASSIGN(hp_.arch, ParseArch(hp_.arch_name));
  const std::string a = hp_.arch_name + ".";
  const std::string where = absl::StrCat("model '", m.path(), "': ");
  constexpr int64_t kMaxDim = int64_t{1} << 20;

  int64_t v = 0;
  CAIRN_LOAD_ASSIGN(hp_.n_embd, md.GetInt(a + "embedding_length"));
  CAIRN_LOAD_ASSIGN(v, md.GetInt(a + "block_count"));
  int64_t nextn = 0;
  CAIRN_LOAD_ASSIGN(nextn, md.GetIntOr(a + "nextn_predict_layers", 0));
  if (v <= 0 || v > 4096 || nextn < 0 || nextn >= v) {
    return absl::InvalidArgumentError(absl::StrCat(where, "block_count ", v, " / nextn_predict_layers ", nextn,
                                                   " out of range"));
  }
  // MTP (next-token prediction) blocks come after the trunk and are not run.
  hp_.n_layer = static_cast<int32_t>(v - nextn);
  CAIRN_LOAD_ASSIGN(v, md.GetInt(a + "attention.head_count"));
  hp_.n_head = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN(v, md.GetIntOr(a + "context_length", 4096));
  hp_.n_ctx_train = static_cast<int32_t>(v);
  if (hp_.n_embd <= 0 || hp_.n_embd > kMaxDim || hp_.n_head <= 0 || hp_.n_head > 4096) {
    return absl::InvalidArgumentError(where + "embedding_length or head_count out of range");
  }
  double dv = 0;
  CAIRN_LOAD_ASSIGN(dv, md.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  hp_.eps = static_cast<float>(dv);

  // Which layers are recurrent, and the K/V head count of the others.
  std::vector<bool> recurrent(hp_.n_layer);
  std::vector<int64_t> head_kv(hp_.n_layer, 0);
  const MetadataValue* kv_key = md.Find(a + "attention.head_count_kv");
  if (kv_key == nullptr) return absl::InvalidArgumentError(where + "attention.head_count_kv is missing");
  if (kv_key->is_array()) {
    std::vector<int64_t> arr;
    CAIRN_LOAD_ASSIGN(arr, md.GetIntArray(a + "attention.head_count_kv"));
    if (static_cast<int64_t>(arr.size()) < hp_.n_layer) {
      return absl::InvalidArgumentError(absl::StrCat(where, "attention.head_count_kv has ", arr.size(),
                                                     " entries for ", hp_.n_layer, " layers"));
    }
    for (int32_t il = 0; il < hp_.n_layer; ++il) head_kv[il] = arr[il];
  } else {
    CAIRN_LOAD_ASSIGN(v, md.GetInt(a + "attention.head_count_kv"));
    std::fill(head_kv.begin(), head_kv.end(), v);
  }
  if (hp_.arch == Arch::kGraniteHybrid) {
    // A zero K/V head count marks a Mamba-2 layer.
    for (int32_t il = 0; il < hp_.n_layer; ++il) recurrent[il] = head_kv[il] == 0;
  } else {
    int64_t interval = 4;
    CAIRN_LOAD_ASSIGN(interval, md.GetIntOr(a + "full_attention_interval", 4));
    if (interval <= 0) return absl::InvalidArgumentError(where + "full_attention_interval must be positive");
    for (int32_t il = 0; il < hp_.n_layer; ++il) recurrent[il] = (il + 1) % interval != 0;
  }
  int32_t n_attn = 0, n_rec = 0;
  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    if (recurrent[il]) {
      ++n_rec;
      continue;
    }
    ++n_attn;
    // One K/V row width for the whole attention part.
    if (head_kv[il] <= 0 || hp_.n_head % head_kv[il] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "layer ", il, ": head_count_kv ", head_kv[il],
                                                     " does not divide head_count ", hp_.n_head));
    }
    if (hp_.n_head_kv != 0 && head_kv[il] != hp_.n_head_kv) {
      return absl::UnimplementedError(where + "attention layers with different head_count_kv are not supported");
    }
    hp_.n_head_kv = static_cast<int32_t>(head_kv[il]);
  }
  if (n_rec == 0) {
    return absl::InvalidArgumentError(where + "no recurrent layer: serve this file with the transformer family");
  }
  if (n_attn == 0) hp_.n_head_kv = 1;  // no attention rows are ever stored

  CAIRN_LOAD_ASSIGN(v, md.GetIntOr(a + "attention.key_length", hp_.n_embd / hp_.n_head));
  hp_.head_dim = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN(v, md.GetIntOr(a + "attention.value_length", hp_.head_dim));
  if (hp_.head_dim <= 0 || hp_.head_dim > 4096 || v != hp_.head_dim) {
    return absl::InvalidArgumentError(where + "attention key_length and value_length must be one positive size");
  }
  double attn_scale = 0;
  CAIRN_LOAD_ASSIGN(attn_scale, md.GetFloatOr(a + "attention.scale", 0.0));
  hp_.kq_scale = attn_scale != 0.0 ? static_cast<float>(attn_scale)
                                   : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));

  // Positional encoding.
  RopeParams& rope = hp_.rope_params;
  CAIRN_LOAD_ASSIGN(v, md.GetIntOr(a + "rope.dimension_count", hp_.head_dim));
  rope.n_dims = static_cast<int32_t>(v);
  double base = 0;
  CAIRN_LOAD_ASSIGN(base, md.GetFloatOr(a + "rope.freq_base", 10000.0));
  rope.freq_base = static_cast<float>(base);
  if (hp_.arch == Arch::kGraniteHybrid) {
    bool finetuned = false;
    CAIRN_LOAD_ASSIGN(finetuned, md.GetBoolOr(a + "rope.scaling.finetuned", false));
    hp_.rope = finetuned;
    rope.type = RopeType::kNormal;
    double f = 0;
    CAIRN_LOAD_ASSIGN(f, md.GetFloatOr(a + "embedding_scale", 0.0));
    hp_.embedding_scale = static_cast<float>(f);
    CAIRN_LOAD_ASSIGN(f, md.GetFloatOr(a + "residual_scale", 0.0));
    hp_.residual_scale = static_cast<float>(f);
    CAIRN_LOAD_ASSIGN(f, md.GetFloatOr(a + "logit_scale", 0.0));
    hp_.logit_scale = static_cast<float>(f);
  } else {
    hp_.rope = true;
    hp_.imrope = true;
    hp_.gated_attention = true;
    rope.type = RopeType::kNeox;  // M-RoPE variants rotate NEOX-style pairs
    std::vector<int64_t> sections;
    CAIRN_LOAD_ASSIGN(sections, md.GetIntArray(a + "rope.dimension_sections"));
    if (sections.empty() || sections.size() > 4) {
      return absl::InvalidArgumentError(where + "rope.dimension_sections must have 1 to 4 entries");
    }
    int64_t total = 0;
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i] < 0 || sections[i] > 4096) return absl::InvalidArgumentError(where + "bad rope section");
      hp_.sections[i] = static_cast<int32_t>(sections[i]);
      total += sections[i];
    }
    if (total <= 0) return absl::InvalidArgumentError(where + "rope.dimension_sections are all zero");
  }
  if (hp_.rope && (rope.n_dims <= 0 || rope.n_dims > hp_.head_dim || rope.n_dims % 2 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, "rope.dimension_count ", rope.n_dims,
                                                   " does not fit head dim ", hp_.head_dim));
  }

  // Recurrent geometry.
  int64_t conv_floats = 0, state_floats = 0;
  if (hp_.arch == Arch::kGraniteHybrid) {
    CAIRN_LOAD_ASSIGN(mamba_, ReadMambaGeometry(md, hp_.arch_name, MambaVersion::kMamba2));
    conv_floats = mamba_.conv_state_floats();
    state_floats = mamba_.ssm_state_floats();
  } else {
    CAIRN_LOAD_ASSIGN(dnet_, ReadDeltaNetGeometry(md, hp_.arch_name));
    conv_floats = dnet_.conv_state_floats();
    state_floats = dnet_.state_floats();
  }

  // Global tensors.
  CAIRN_LOAD_ASSIGN(tok_embd_, m.GetTensor("token_embd.weight"));
  if (tok_embd_->shape.size() < 2 || tok_embd_->shape[0] != hp_.n_embd || tok_embd_->n_rows() <= 0 ||
      tok_embd_->n_rows() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(where + "token_embd.weight rows are not n_embd wide");
  }
  hp_.n_vocab = static_cast<int32_t>(tok_embd_->n_rows());
  CAIRN_LOAD_ASSIGN(output_norm_, LoadF32(m, "output_norm.weight", {hp_.n_embd}, PathInErrors::kYes));
  if (m.FindTensor("output.weight")) {
    CAIRN_LOAD_ASSIGN(output_, LoadShapedMatrix(m, "output.weight", hp_.n_embd, hp_.n_vocab, PathInErrors::kYes));
  } else {
    output_ = WeightMatrix::FromTensor(*tok_embd_);  // tied output
  }

  std::vector<int64_t> n_ff(hp_.n_layer);
  const MetadataValue* ff_key = md.Find(a + "feed_forward_length");
  if (ff_key && ff_key->is_array()) {
    std::vector<int64_t> arr;
    CAIRN_LOAD_ASSIGN(arr, md.GetIntArray(a + "feed_forward_length"));
    if (static_cast<int64_t>(arr.size()) < hp_.n_layer) {
      return absl::InvalidArgumentError(where + "feed_forward_length has too few entries");
    }
    for (int32_t il = 0; il < hp_.n_layer; ++il) n_ff[il] = arr[il];
  } else {
    CAIRN_LOAD_ASSIGN(v, md.GetInt(a + "feed_forward_length"));
    std::fill(n_ff.begin(), n_ff.end(), v);
  }

  layers_.resize(hp_.n_layer);
  size_t weight_bytes = output_.bytes();
  int32_t ia = 0, ir = 0;
  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    if (n_ff[il] <= 0 || n_ff[il] > kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat(where, "layer ", il, ": feed_forward_length out of range"));
    }
    const int32_t part = recurrent[il] ? ir++ : ia++;
    if (absl::Status s = LoadLayer(il, recurrent[il], part, n_ff[il]); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(where, s.message()));
    }
    const Layer& L = layers_[il];
    weight_bytes += L.gate.bytes() + L.up.bytes() + L.down.bytes();
    if (!L.recurrent) {
      weight_bytes += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wo.bytes();
    } else if (hp_.arch == Arch::kGraniteHybrid) {
      weight_bytes += L.mamba.matrix_bytes();
    } else {
      weight_bytes += L.dnet.matrix_bytes();
    }
  }

  // Memory geometry and the snapshot layout fingerprint.
  uint64_t layout = ModelFingerprint(m);
  layout = FingerprintMix(layout, "cairn-hybrid-v1", 15);
  for (int64_t x : {int64_t{n_attn}, int64_t{n_rec}, int64_t{hp_.n_head_kv}, int64_t{hp_.head_dim}, conv_floats,
                    state_floats}) {
    layout = FingerprintMix(layout, x);
  }
  KvGeometry& kv = geometry_.attention;
  kv.n_layers = n_attn;
  kv.k_dim = static_cast<int64_t>(hp_.n_head_kv) * hp_.head_dim;
  kv.v_dim = kv.k_dim;
  kv.capacity = options.max_context > 0 ? options.max_context : hp_.n_ctx_train;
  kv.layout = FingerprintMix(layout, "attention", 9);
  geometry_.recurrent_layers = n_rec;
  geometry_.conv_floats = conv_floats;
  geometry_.state_floats = state_floats;
  geometry_.layout = layout;

  info_.name = options.name.empty() ? std::filesystem::path(m.path()).stem().string() : options.name;
  info_.arch = hp_.arch_name;
  info_.family = kHybridFamily;
  info_.n_vocab = hp_.n_vocab;
  info_.n_ctx_train = hp_.n_ctx_train;
  info_.n_embd = static_cast<int32_t>(hp_.n_embd);
  // Embedding chunks carry M-RoPE positions: only the IMROPE model uses them.
  info_.accepts_embeddings = hp_.imrope;
  info_.caps.truncatable = false;
  info_.caps.rollback_window = 0;
  info_.caps.has_checkpoint_state = true;
  info_.snapshots_within_run = true;
  info_.weight_bytes = weight_bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> HybridBackend::Create(std::shared_ptr<const ModelFile> model,
                                                               const BackendOptions& options) {
  if (!model) return absl::InvalidArgumentError("no model");
  std::unique_ptr<HybridBackend> b(new HybridBackend(std::move(model), options.n_threads));
  if (absl::Status s = b->Load(options); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

absl::StatusOr<std::unique_ptr<SequenceMemory>> HybridBackend::NewSequence() {
  absl::StatusOr<std::unique_ptr<HybridMemory>> m = HybridMemory::Create(geometry_, this);
  if (!m.ok()) return m.status();
  return std::unique_ptr<SequenceMemory>(std::move(*m));
}

absl::Status HybridBackend::Validate(std::span<const SequenceRun> batch) const {
  const ForwardRules rules{info_.n_vocab, info_.accepts_embeddings, info_.snapshots_within_run,
                           geometry_.attention.capacity};
  // Positions and stored rows both count against the context (a chunk
  // stores more rows than positions it advances).
  return ValidateForwardBatch(
      batch, rules,
      [this](const SequenceMemory& m) {
        auto* h = dynamic_cast<const HybridMemory*>(&m);
        return h != nullptr && h->owner() == this;
      },
      [](const SequenceMemory& m) { return static_cast<int64_t>(static_cast<const HybridMemory&>(m).n_rows()); });
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

absl::StatusOr<std::vector<RunLogits>> HybridBackend::Forward(std::span<const SequenceRun> batch) {
  std::lock_guard<std::mutex> lock(forward_mu_);
  if (absl::Status s = Validate(batch); !s.ok()) return s;
  const size_t R = batch.size();
  std::vector<HybridMemory*> mems(R);
  std::vector<int64_t> offset(R + 1, 0), span(R);
  for (size_t r = 0; r < R; ++r) {
    mems[r] = static_cast<HybridMemory*>(batch[r].memory);
    const bool chunk = batch[r].chunk != nullptr;
    const int64_t n = chunk ? static_cast<int64_t>(batch[r].chunk->nx) * batch[r].chunk->ny
                            : static_cast<int64_t>(batch[r].tokens.size());
    span[r] = chunk ? std::max(batch[r].chunk->nx, batch[r].chunk->ny) : n;
    offset[r + 1] = offset[r] + n;
    // Growing storage does not change what is absorbed: safe before compute.
    if (absl::Status s = mems[r]->attention().Reserve(static_cast<Pos>(mems[r]->n_rows() + n)); !s.ok()) return s;
  }
  const int64_t T = offset.back();
  const int64_t E = hp_.n_embd;
  const int64_t hd = hp_.head_dim;
  const int64_t q_dim = static_cast<int64_t>(hp_.n_head) * hd;
  const int64_t kv_dim = geometry_.attention.k_dim;
  int64_t max_ff = 0;
  for (const Layer& L : layers_) max_ff = std::max(max_ff, L.n_ff);

  // Per row: its run, its K/V row, and its (t, y, x, e) rope position.
  std::vector<int32_t> row_run(T), kv_row(T);
  std::vector<std::array<float, 4>> rope_pos(T);
  for (size_t r = 0; r < R; ++r) {
    const Pos p0 = batch[r].start_pos;
    const EmbeddingChunk* c = batch[r].chunk;
    for (int64_t i = 0; i < offset[r + 1] - offset[r]; ++i) {
      const int64_t row = offset[r] + i;
      row_run[row] = static_cast<int32_t>(r);
      kv_row[row] = static_cast<int32_t>(mems[r]->n_rows() + i);
      if (c != nullptr) {
        // Image row i of a chunk at p0: (p0, p0 + i / nx, p0 + i % nx, 0).
        rope_pos[row] = {static_cast<float>(p0), static_cast<float>(p0 + i / c->nx),
                         static_cast<float>(p0 + i % c->nx), 0.0f};
      } else {
        const float p = static_cast<float>(p0 + i);
        rope_pos[row] = {p, p, p, 0.0f};
      }
    }
  }

  std::vector<float> x(T * E), xn(T * E), proj(T * E);
  const size_t embd_row_bytes = RowBytes(tok_embd_->type, E);
  pool_.ForEach(T, [&](int64_t i) {
    const SequenceRun& run = batch[row_run[i]];
    const int64_t j = i - offset[row_run[i]];
    if (run.chunk != nullptr) {
      std::copy_n(run.chunk->rows + j * E, E, &x[i * E]);
    } else {
      DequantizeRow(tok_embd_->type, tok_embd_->data + static_cast<size_t>(run.tokens[j]) * embd_row_bytes, &x[i * E],
                    E);
    }
    if (hp_.embedding_scale != 0.0f) {
      for (int64_t e = 0; e < E; ++e) x[i * E + e] *= hp_.embedding_scale;
    }
  });

  // cos/sin per row, shared by every attention layer.
  const int32_t n_dims = hp_.rope ? hp_.rope_params.n_dims : 0;
  std::vector<float> rope_cache(T * n_dims);
  if (hp_.rope) {
    pool_.ForEach(T, [&](int64_t i) {
      if (hp_.imrope) {
        RopeCacheImrope(hp_.rope_params, hp_.sections, rope_pos[i].data(), &rope_cache[i * n_dims]);
      } else {
        RopeCache(hp_.rope_params, rope_pos[i][0], &rope_cache[i * n_dims]);
      }
    });
  }

  // Scratch of the attention layers.
  const int64_t q_full = hp_.gated_attention ? 2 * q_dim : q_dim;
  std::vector<float> qf(T * q_full), q(T * q_dim), k(T * kv_dim), vv(T * kv_dim), attn(T * q_dim);
  std::vector<float> gate(T * max_ff), up(T * max_ff);
  std::vector<int32_t> kv_end(T);
  for (int64_t i = 0; i < T; ++i) kv_end[i] = kv_row[i] + 1;  // causal in row order, chunks included
  AttentionParams ap;
  ap.n_head = hp_.n_head;
  ap.n_head_kv = hp_.n_head_kv;
  ap.head_dim_k = static_cast<int32_t>(hd);
  ap.head_dim_v = static_cast<int32_t>(hd);
  ap.scale = hp_.kq_scale;

  // The recurrent layers' runs (state pointers filled per layer), and the
  // snapshots taken inside runs: per run, one tap per snapshot row, writing
  // into the recurrent part of that snapshot.
  std::vector<MambaMixerRun> mruns(R);
  std::vector<DeltaNetRun> druns(R);
  std::vector<RunLogits> out(R);
  std::vector<std::vector<StateTap>> taps(R);
  std::vector<std::vector<uint8_t*>> tap_states(R);
  for (size_t r = 0; r < R; ++r) {
    for (int32_t row : batch[r].snapshot_rows) {
      uint8_t* state = nullptr;
      out[r].snapshots.push_back(mems[r]->AllocateCheckpointAhead(batch[r].start_pos + row + 1, &state));
      tap_states[r].push_back(state);
      taps[r].push_back(StateTap{row + 1, nullptr, nullptr});
    }
  }
  auto set_taps = [&](size_t r, int32_t part) {
    const RecurrentMemory& rec = mems[r]->recurrent();
    for (size_t k = 0; k < taps[r].size(); ++k) {
      taps[r][k].conv_state = rec.conv_state_in(tap_states[r][k], part);
      taps[r][k].state = rec.ssm_state_in(tap_states[r][k], part);
    }
    return std::span<const StateTap>(taps[r]);
  };
  auto residual_add = [&](const std::vector<float>& y) {
    const float s = hp_.residual_scale;
    pool_.ForEach(T, [&](int64_t i) {
      if (s != 0.0f) {
        for (int64_t e = 0; e < E; ++e) x[i * E + e] += s * y[i * E + e];
      } else {
        AddF32(&x[i * E], &y[i * E], &x[i * E], E);
      }
    });
  };

  for (int32_t il = 0; il < hp_.n_layer; ++il) {
    const Layer& L = layers_[il];
    pool_.ForEach(T, [&](int64_t i) { RmsNorm(&x[i * E], L.attn_norm.data(), E, hp_.eps, &xn[i * E]); });
    if (L.recurrent) {
      if (hp_.arch == Arch::kGraniteHybrid) {
        for (size_t r = 0; r < R; ++r) {
          RecurrentMemory& rec = mems[r]->recurrent();
          mruns[r] = MambaMixerRun{offset[r], offset[r + 1] - offset[r], rec.conv_state(L.part_index),
                                   rec.ssm_state(L.part_index), set_taps(r, L.part_index)};
        }
        MambaMixerForward(mamba_, L.mamba, mruns, xn.data(), T, proj.data(), pool_);
      } else {
        for (size_t r = 0; r < R; ++r) {
          RecurrentMemory& rec = mems[r]->recurrent();
          druns[r] = DeltaNetRun{offset[r], offset[r + 1] - offset[r], rec.conv_state(L.part_index),
                                 rec.ssm_state(L.part_index), set_taps(r, L.part_index)};
        }
        DeltaNetForward(dnet_, L.dnet, hp_.eps, druns, xn.data(), T, proj.data(), pool_);
      }
    } else {
      const int32_t ia = L.part_index;
      MatMul(L.wq, xn.data(), T, qf.data(), pool_);
      MatMul(L.wk, xn.data(), T, k.data(), pool_);
      MatMul(L.wv, xn.data(), T, vv.data(), pool_);
      pool_.ForEach(T, [&](int64_t i) {
        float* qi = &q[i * q_dim];
        if (hp_.gated_attention) {
          // Per head: [query (hd) | gate (hd)]; the gate waits in qf.
          for (int32_t h = 0; h < hp_.n_head; ++h) std::copy_n(&qf[i * q_full + 2 * h * hd], hd, qi + h * hd);
        } else {
          std::copy_n(&qf[i * q_full], q_dim, qi);
        }
        float* ki = &k[i * kv_dim];
        if (!L.q_norm.empty()) RmsNormRows(qi, L.q_norm.data(), hp_.n_head, hd, hd, hp_.eps, qi);
        if (!L.k_norm.empty()) RmsNormRows(ki, L.k_norm.data(), hp_.n_head_kv, hd, hd, hp_.eps, ki);
        if (hp_.rope) {
          RopeApply(hp_.rope_params, &rope_cache[i * n_dims], qi, hp_.n_head, static_cast<int32_t>(hd));
          RopeApply(hp_.rope_params, &rope_cache[i * n_dims], ki, hp_.n_head_kv, static_cast<int32_t>(hd));
        }
        KvMemory& kvm = mems[row_run[i]]->attention();
        std::copy_n(ki, kv_dim, kvm.k(ia) + static_cast<int64_t>(kv_row[i]) * kv_dim);
        std::copy_n(&vv[i * kv_dim], kv_dim, kvm.v(ia) + static_cast<int64_t>(kv_row[i]) * kv_dim);
      });
      for (size_t r = 0; r < R; ++r) {
        KvMemory& kvm = mems[r]->attention();
        AttentionArgs aa;
        aa.q = &q[offset[r] * q_dim];
        aa.q_stride = q_dim;
        aa.n_q = offset[r + 1] - offset[r];
        aa.kv_end = &kv_end[offset[r]];
        aa.k = kvm.k(ia);
        aa.k_stride = kv_dim;
        aa.v = kvm.v(ia);
        aa.v_stride = kv_dim;
        aa.n_kv = kv_end[offset[r + 1] - 1];
        aa.out = &attn[offset[r] * q_dim];
        aa.out_stride = q_dim;
        Attention(ap, aa, pool_);
      }
      if (hp_.gated_attention) {
        pool_.ForEach(T, [&](int64_t i) {
          for (int32_t h = 0; h < hp_.n_head; ++h) {
            const float* g = &qf[i * q_full + (2 * h + 1) * hd];
            float* o = &attn[i * q_dim + h * hd];
            for (int64_t d = 0; d < hd; ++d) o[d] *= Sigmoid(g[d]);
          }
        });
      }
      MatMul(L.wo, attn.data(), T, proj.data(), pool_);
    }
    residual_add(proj);

    const int64_t F = L.n_ff;
    pool_.ForEach(T, [&](int64_t i) { RmsNorm(&x[i * E], L.ffn_norm.data(), E, hp_.eps, &xn[i * E]); });
    MatMul(L.gate, xn.data(), T, gate.data(), pool_);
    MatMul(L.up, xn.data(), T, up.data(), pool_);
    pool_.ForEach(T, [&](int64_t i) { SwiGlu(&gate[i * F], &up[i * F], F, &gate[i * F]); });
    MatMul(L.down, gate.data(), T, proj.data(), pool_);
    residual_add(proj);
  }

  // Only the wanted rows go through the output head.
  std::vector<int64_t> wanted;
  for (size_t r = 0; r < R; ++r) {
    for (int32_t row : batch[r].logit_rows) wanted.push_back(offset[r] + row);
  }
  const int64_t W = static_cast<int64_t>(wanted.size());
  std::vector<float> hn(W * E), logits(W * hp_.n_vocab);
  pool_.ForEach(W, [&](int64_t j) { RmsNorm(&x[wanted[j] * E], output_norm_.data(), E, hp_.eps, &hn[j * E]); });
  MatMul(output_, hn.data(), W, logits.data(), pool_);
  if (hp_.logit_scale != 0.0f) {
    const float inv = 1.0f / hp_.logit_scale;
    for (float& l : logits) l *= inv;
  }

  int64_t j = 0;
  for (size_t r = 0; r < R; ++r) {
    RunLogits& rl = out[r];
    rl.n_rows = static_cast<int32_t>(batch[r].logit_rows.size());
    rl.n_vocab = hp_.n_vocab;
    rl.values.assign(logits.begin() + j * hp_.n_vocab, logits.begin() + (j + rl.n_rows) * hp_.n_vocab);
    j += rl.n_rows;
    mems[r]->Commit(static_cast<Pos>(span[r]), offset[r + 1] - offset[r], batch[r].chunk != nullptr);
  }
  return out;
}

}  // namespace

std::vector<std::string> HybridArchs() { return {"granitehybrid", "qwen35"}; }

absl::StatusOr<std::unique_ptr<Backend>> CreateHybridBackend(std::shared_ptr<const ModelFile> model,
                                                             const BackendOptions& options) {
  return HybridBackend::Create(std::move(model), options);
}

absl::Status RegisterHybridFamily(BackendRegistry& registry) {
  return registry.Register(kHybridFamily, HybridArchs(), &CreateHybridBackend);
}

}  // namespace cairn
