#include "backends/recurrent/recurrent_backend.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/kernels/norm.h"
#include "backends/model/dequant.h"
#include "backends/recurrent/recurrent_memory.h"

namespace cairn {
namespace {

// FNV-1a, 64 bits: stable across processes and builds, unlike absl::Hash,
// because snapshots may be written to disk and read by another replica.
class Fnv64 {
 public:
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;
    }
  }
  void Int(int64_t v) { Bytes(&v, sizeof v); }
  void Str(const std::string& s) {
    Int(static_cast<int64_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// Fingerprint of the model and the state geometry. Hashing every weight
// would cost a pass over gigabytes at load, so each tensor contributes its
// name, type, shape and up to 3 x 64 sampled bytes (start, middle, end):
// enough to tell apart two models of one shape, cheap to compute.
uint64_t Fingerprint(const ModelFile& model, const std::string& arch, const MambaGeometry& g, int64_t n_layers) {
  Fnv64 h;
  h.Str("cairn.recurrent.state.v1");
  h.Str(arch);
  for (int64_t v : {static_cast<int64_t>(g.version), g.n_embd, g.d_conv, g.d_inner, g.d_state, g.n_head,
                    g.head_dim, g.n_group, g.dt_rank, static_cast<int64_t>(g.dt_b_c_rms), n_layers}) {
    h.Int(v);
  }
  for (const TensorInfo* t : model.tensors()) {
    h.Str(t->name);
    h.Int(static_cast<int64_t>(t->type));
    for (int64_t d : t->shape) h.Int(d);
    const size_t n = static_cast<size_t>(t->n_bytes);
    const size_t k = std::min<size_t>(64, n);
    if (t->data != nullptr && n > 0) {
      h.Bytes(t->data, k);
      h.Bytes(t->data + (n - k) / 2, k);
      h.Bytes(t->data + (n - k), k);
    }
  }
  return h.value();
}

absl::StatusOr<std::vector<float>> LoadNorm(const ModelFile& model, const std::string& name, int64_t n) {
  absl::StatusOr<const TensorInfo*> t = model.GetTensor(name);
  if (!t.ok()) return t.status();
  if ((*t)->n_elements() != n || (*t)->row_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' has ", (*t)->n_elements(), " elements, expected [", n, "]"));
  }
  return DequantizeTensor(**t);
}

}  // namespace

RecurrentBackend::RecurrentBackend(std::shared_ptr<const ModelFile> model, const BackendOptions& options)
    : model_(std::move(model)), options_(options) {}

absl::StatusOr<std::unique_ptr<RecurrentBackend>> RecurrentBackend::Create(std::shared_ptr<const ModelFile> model,
                                                                           const BackendOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  if (options.max_context < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_context ", options.max_context, " is negative"));
  }
  std::unique_ptr<RecurrentBackend> b(new RecurrentBackend(std::move(model), options));
  if (absl::Status s = b->Load(); !s.ok()) return s;
  return b;
}

absl::Status RecurrentBackend::Load() {
  const ModelFile& model = *model_;
  const Metadata& md = model.metadata();
  absl::StatusOr<std::string> arch = model.Architecture();
  if (!arch.ok()) return arch.status();
  MambaVersion version;
  if (*arch == "mamba2") {
    version = MambaVersion::kMamba2;
  } else if (*arch == "mamba") {
    version = MambaVersion::kMamba1;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("the recurrent family serves archs mamba2 and mamba, not '", *arch, "'"));
  }
  absl::StatusOr<MambaGeometry> geometry = ReadMambaGeometry(md, *arch, version);
  if (!geometry.ok()) return geometry.status();
  geometry_ = *geometry;
  const MambaGeometry& g = geometry_;

  absl::StatusOr<int64_t> n_layer = md.GetInt(*arch + ".block_count");
  if (!n_layer.ok()) return n_layer.status();
  if (*n_layer <= 0 || *n_layer > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(*arch, ".block_count = ", *n_layer, " is out of range"));
  }
  absl::StatusOr<int64_t> n_ctx = md.GetIntOr(*arch + ".context_length", 0);
  if (!n_ctx.ok()) return n_ctx.status();

  absl::StatusOr<const TensorInfo*> embd = model.GetTensor("token_embd.weight");
  if (!embd.ok()) return embd.status();
  token_embd_ = *embd;
  if (token_embd_->shape.size() < 2 || token_embd_->row_size() != g.n_embd || token_embd_->n_rows() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_embd.weight rows have ", token_embd_->row_size(), " elements, expected n_embd ", g.n_embd));
  }
  const int64_t n_vocab = token_embd_->n_rows();

  absl::StatusOr<std::vector<float>> out_norm = LoadNorm(model, "output_norm.weight", g.n_embd);
  if (!out_norm.ok()) return out_norm.status();
  output_norm_ = *std::move(out_norm);
  // Untied output when present, else the token embedding (tied).
  const TensorInfo* out = model.FindTensor("output.weight");
  if (out == nullptr) out = token_embd_;
  if (out->row_size() != g.n_embd || out->n_rows() != n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("output.weight is ", out->row_size(), " x ", out->n_rows(),
                                                   ", expected ", g.n_embd, " x ", n_vocab));
  }
  output_ = WeightMatrix::FromTensor(*out);

  size_t weight_bytes = output_.bytes();
  layers_.resize(static_cast<size_t>(*n_layer));
  for (int64_t l = 0; l < *n_layer; ++l) {
    absl::StatusOr<std::vector<float>> norm = LoadNorm(model, absl::StrCat("blk.", l, ".attn_norm.weight"), g.n_embd);
    if (!norm.ok()) return norm.status();
    layers_[l].attn_norm = *std::move(norm);
    absl::StatusOr<MambaMixerWeights> mixer = LoadMambaMixer(model, g, static_cast<int>(l));
    if (!mixer.ok()) return mixer.status();
    layers_[l].mixer = *std::move(mixer);
    weight_bytes += layers_[l].mixer.matrix_bytes();
  }

  layout_ = Fingerprint(model, *arch, g, *n_layer);
  pool_ = std::make_unique<ThreadPool>(options_.n_threads);

  info_.name = options_.name.empty() ? std::filesystem::path(model.path()).stem().string() : options_.name;
  info_.arch = *arch;
  info_.family = kRecurrentFamily;
  info_.n_vocab = static_cast<int32_t>(n_vocab);
  info_.n_ctx_train = static_cast<int32_t>(std::clamp<int64_t>(*n_ctx, 0, std::numeric_limits<int32_t>::max()));
  info_.n_embd = static_cast<int32_t>(g.n_embd);
  info_.accepts_embeddings = false;
  info_.caps.truncatable = false;
  info_.caps.rollback_window = 0;
  info_.caps.has_checkpoint_state = true;
  info_.snapshots_within_run = true;
  info_.weight_bytes = weight_bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SequenceMemory>> RecurrentBackend::NewSequence() {
  absl::StatusOr<std::unique_ptr<RecurrentMemory>> m = RecurrentMemory::Create(
      this, layout_, n_layers(), geometry_.conv_state_floats(), geometry_.ssm_state_floats());
  if (!m.ok()) return m.status();
  return std::unique_ptr<SequenceMemory>(std::move(*m));
}

absl::Status RecurrentBackend::Validate(std::span<const SequenceRun> batch) const {
  // No attention rows: only positions are bounded, by --max-context if set.
  const ForwardRules rules{info_.n_vocab, false, info_.snapshots_within_run,
                           options_.max_context > 0 ? options_.max_context : std::numeric_limits<Pos>::max()};
  return ValidateForwardBatch(batch, rules, [this](const SequenceMemory& m) {
    auto* rec = dynamic_cast<const RecurrentMemory*>(&m);
    return rec != nullptr && rec->owner() == this;
  });
}

void RecurrentBackend::RunUbatch(std::span<const Segment> segments, std::span<const SequenceRun> batch,
                                 std::span<RecurrentMemory* const> memories, std::vector<RunLogits>& results,
                                 std::vector<size_t>& next_logit) {
  const MambaGeometry& g = geometry_;
  const int64_t n_embd = g.n_embd;
  int64_t n_rows = 0;
  for (const Segment& seg : segments) n_rows += seg.n;

  // Residual stream, one row per token of every segment.
  std::vector<float> x(static_cast<size_t>(n_rows * n_embd));
  int64_t row = 0;
  for (const Segment& seg : segments) {
    for (int64_t t = 0; t < seg.n; ++t, ++row) {
      DequantizeRow(token_embd_->type, token_embd_->row(batch[seg.run].tokens[seg.begin + t]),
                    x.data() + row * n_embd, n_embd);
    }
  }

  // Snapshots inside the runs: per segment, the taps ending at its
  // snapshot rows and the snapshots they fill (pointers set per layer).
  std::vector<std::vector<StateTap>> taps(segments.size());
  std::vector<std::vector<Snapshot*>> tap_snapshots(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = segments[i];
    const std::span<const int32_t> rows = batch[seg.run].snapshot_rows;
    for (size_t k = 0; k < rows.size(); ++k) {
      if (rows[k] < seg.begin || rows[k] >= seg.begin + seg.n) continue;
      taps[i].push_back(StateTap{rows[k] + 1 - seg.begin, nullptr, nullptr});
      tap_snapshots[i].push_back(&results[seg.run].snapshots[k]);
    }
  }

  float* normed = ubatch_scratch_.Get(0, x.size());
  float* mixed = ubatch_scratch_.Get(1, x.size());
  std::vector<MambaMixerRun> runs(segments.size());
  ThreadPool& pool = *pool_;
  for (int64_t l = 0; l < n_layers(); ++l) {
    const Layer& layer = layers_[l];
    pool.ParallelFor(n_rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        RmsNorm(x.data() + t * n_embd, layer.attn_norm.data(), n_embd, g.rms_eps, normed + t * n_embd);
      }
    });
    int64_t offset = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      RecurrentMemory* memory = memories[segments[i].run];
      runs[i].row_begin = offset;
      runs[i].n_rows = segments[i].n;
      runs[i].conv_state = memory->conv_state(l);
      runs[i].ssm_state = memory->ssm_state(l);
      for (size_t k = 0; k < taps[i].size(); ++k) {
        uint8_t* state = tap_snapshots[i][k]->data.data();
        taps[i][k].conv_state = memory->conv_state_in(state, l);
        taps[i][k].state = memory->ssm_state_in(state, l);
      }
      runs[i].taps = taps[i];
      offset += segments[i].n;
    }
    MambaMixerForward(g, layer.mixer, runs, normed, n_rows, mixed, pool, &mixer_scratch_);
    pool.ParallelFor(n_rows * n_embd, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) x[k] += mixed[k];
    });
  }

  // Final norm and output projection, for the requested rows only.
  std::vector<float> h;
  std::vector<std::pair<size_t, size_t>> dest;  // (run, index into its logit rows)
  row = 0;
  for (const Segment& seg : segments) {
    const std::span<const int32_t> wanted = batch[seg.run].logit_rows;
    size_t& k = next_logit[seg.run];
    for (; k < wanted.size() && wanted[k] < seg.begin + seg.n; ++k) {
      h.resize(h.size() + static_cast<size_t>(n_embd));
      RmsNorm(x.data() + (row + wanted[k] - seg.begin) * n_embd, output_norm_.data(), n_embd, g.rms_eps,
              h.data() + h.size() - n_embd);
      dest.emplace_back(seg.run, k);
    }
    row += seg.n;
  }
  if (dest.empty()) return;
  const int64_t n_vocab = info_.n_vocab;
  std::vector<float> logits(dest.size() * static_cast<size_t>(n_vocab));
  MatMul(output_, h.data(), static_cast<int64_t>(dest.size()), logits.data(), pool);
  for (size_t i = 0; i < dest.size(); ++i) {
    std::memcpy(results[dest[i].first].values.data() + dest[i].second * n_vocab, logits.data() + i * n_vocab,
                static_cast<size_t>(n_vocab) * sizeof(float));
  }
}

absl::StatusOr<std::vector<RunLogits>> RecurrentBackend::Forward(std::span<const SequenceRun> batch) {
  if (absl::Status s = Validate(batch); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(forward_mu_);

  std::vector<RecurrentMemory*> memories(batch.size());
  std::vector<RunLogits> results(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    memories[i] = static_cast<RecurrentMemory*>(batch[i].memory);
    results[i].n_rows = static_cast<int32_t>(batch[i].logit_rows.size());
    results[i].n_vocab = info_.n_vocab;
    results[i].values.resize(batch[i].logit_rows.size() * static_cast<size_t>(info_.n_vocab));
    for (int32_t row : batch[i].snapshot_rows) {
      results[i].snapshots.push_back(memories[i]->AllocateSnapshot(batch[i].start_pos + row + 1));
    }
  }

  // Micro-batches of at most kUbatchRows rows bound the scratch memory of
  // long prompts. A run split across micro-batches continues from the state
  // the previous one left: the scan is sequential either way.
  std::vector<size_t> next_logit(batch.size(), 0);
  std::vector<Segment> segments;
  size_t run = 0;
  int64_t begin = 0;
  while (run < batch.size()) {
    segments.clear();
    int64_t rows = 0;
    while (run < batch.size() && rows < kUbatchRows) {
      const int64_t len = static_cast<int64_t>(batch[run].tokens.size());
      const int64_t take = std::min(len - begin, kUbatchRows - rows);
      segments.push_back(Segment{run, begin, take});
      rows += take;
      begin += take;
      if (begin == len) {
        ++run;
        begin = 0;
      }
    }
    RunUbatch(segments, batch, memories, results, next_logit);
  }
  for (size_t i = 0; i < batch.size(); ++i) memories[i]->Advance(static_cast<Pos>(batch[i].tokens.size()));
  return results;
}

absl::Status RegisterRecurrentFamily(BackendRegistry& registry) {
  return registry.Register(kRecurrentFamily, {"mamba2", "mamba"},
                           [](std::shared_ptr<const ModelFile> model,
                              const BackendOptions& options) -> absl::StatusOr<std::unique_ptr<Backend>> {
                             absl::StatusOr<std::unique_ptr<RecurrentBackend>> b =
                                 RecurrentBackend::Create(std::move(model), options);
                             if (!b.ok()) return b.status();
                             return std::unique_ptr<Backend>(std::move(*b));
                           });
}

}  // namespace cairn
