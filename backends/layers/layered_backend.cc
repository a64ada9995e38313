#include "backends/layers/layered_backend.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/kernels/thread_pool.h"

namespace cairn {
namespace {

class LayeredBackend final : public Backend {
 public:
  LayeredBackend(std::shared_ptr<const ModelFile> model, std::unique_ptr<PackedWeights> packed,
                 std::unique_ptr<ArchModel> arch, FamilyMemory memory, MemoryCapabilities caps,
                 const BackendOptions& options)
      : model_(std::move(model)),
        packed_(std::move(packed)),
        arch_(std::move(arch)),
        memory_(std::move(memory)),
        pool_(options.n_threads),
        precision_(options.exact_activations ? MatMulPrecision::kExact : MatMulPrecision::kInt8Activations) {
    const ArchShape& s = arch_->shape();
    info_.name = options.name.empty() ? std::filesystem::path(model_->path()).stem().string() : options.name;
    info_.arch = s.arch;
    info_.family = memory_.family;
    info_.n_vocab = s.n_vocab;
    info_.n_ctx_train = s.n_ctx_train;
    info_.n_embd = s.n_embd;
    info_.accepts_embeddings = s.accepts_embeddings;
    info_.caps = caps;
    info_.snapshots_within_run = memory_.snapshots_within_run;
    info_.weight_bytes = s.weight_bytes;
  }

  const ModelInfo& info() const override { return info_; }

  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override {
    absl::StatusOr<std::unique_ptr<LayerMemory>> m = memory_.create(this);
    if (!m.ok()) return m.status();
    return std::unique_ptr<SequenceMemory>(std::move(*m));
  }

  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override;

 private:
  // The passes of one call: every run whole, or micro-batches of at most
  // memory_.ubatch_rows rows (a run may straddle two).
  std::vector<std::vector<ForwardPass::Segment>> Passes(std::span<const int64_t> rows) const;

  std::shared_ptr<const ModelFile> model_;
  std::unique_ptr<const PackedWeights> packed_;  // null: arch_'s matrices point into model_
  std::unique_ptr<const ArchModel> arch_;
  const FamilyMemory memory_;
  ModelInfo info_;
  std::mutex mu_;  // Forward uses every pool thread and the work buffers: one call at a time
  ThreadPool pool_;
  const MatMulPrecision precision_;
  WorkBuffers buffers_;
};

std::vector<std::vector<ForwardPass::Segment>> LayeredBackend::Passes(std::span<const int64_t> rows) const {
  std::vector<std::vector<ForwardPass::Segment>> passes(1);
  if (memory_.ubatch_rows <= 0) {
    for (size_t r = 0; r < rows.size(); ++r) passes[0].push_back({r, 0, rows[r]});
    return passes;
  }
  const int64_t limit = memory_.ubatch_rows;
  int64_t in_pass = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t begin = 0; begin < rows[r];) {
      if (in_pass == limit) {
        passes.emplace_back();
        in_pass = 0;
      }
      const int64_t take = std::min(rows[r] - begin, limit - in_pass);
      passes.back().push_back({r, begin, take});
      in_pass += take;
      begin += take;
    }
  }
  return passes;
}

absl::StatusOr<std::vector<RunLogits>> LayeredBackend::Forward(std::span<const SequenceRun> batch) {
  std::lock_guard<std::mutex> lock(mu_);
  const ForwardRules rules{info_.n_vocab, info_.accepts_embeddings, memory_.snapshots_within_run, memory_.capacity};
  // Positions and stored rows both count against the capacity (a chunk
  // stores more rows than positions it advances).
  absl::Status valid = ValidateForwardBatch(
      batch, rules,
      [this](const SequenceMemory& m) {
        auto* lm = dynamic_cast<const LayerMemory*>(&m);
        return lm != nullptr && lm->owner() == this;
      },
      [](const SequenceMemory& m) { return static_cast<const LayerMemory&>(m).stored_rows(); });
  if (!valid.ok()) return valid;

  const size_t R = batch.size();
  std::vector<LayerMemory*> memories(R);
  std::vector<int64_t> rows(R);
  std::vector<Pos> span(R);
  for (size_t r = 0; r < R; ++r) {
    const SequenceRun& run = batch[r];
    memories[r] = static_cast<LayerMemory*>(run.memory);
    rows[r] = run.chunk != nullptr ? run.chunk->n_rows() : static_cast<int64_t>(run.tokens.size());
    span[r] = run.chunk != nullptr ? std::max(run.chunk->nx, run.chunk->ny) : static_cast<Pos>(rows[r]);
    // Growing storage does not change what is absorbed: safe before compute.
    if (absl::Status s = memories[r]->Reserve(run.start_pos + span[r], memories[r]->stored_rows() + rows[r]); !s.ok()) {
      return s;
    }
  }

  // The results, with the snapshots taken inside runs allocated up front:
  // the pass writes their recurrent states at snapshot_states[r][k].
  std::vector<RunLogits> results(R);
  std::vector<std::vector<uint8_t*>> snapshot_states(R);
  for (size_t r = 0; r < R; ++r) {
    RunLogits& rl = results[r];
    rl.n_rows = static_cast<int32_t>(batch[r].logit_rows.size());
    rl.n_vocab = info_.n_vocab;
    rl.values.resize(batch[r].logit_rows.size() * static_cast<size_t>(info_.n_vocab));
    rl.snapshots.reserve(batch[r].snapshot_rows.size());
    for (int32_t row : batch[r].snapshot_rows) {
      uint8_t* state = nullptr;
      rl.snapshots.push_back(memories[r]->AllocateCheckpointAhead(batch[r].start_pos + row + 1, &state));
      snapshot_states[r].push_back(state);
    }
  }

  for (const std::vector<ForwardPass::Segment>& segments : Passes(rows)) {
    ForwardPass pass(batch, segments, memories, results, snapshot_states, info_.n_embd, pool_, precision_, buffers_);
    arch_->Forward(pass);
  }
  for (size_t r = 0; r < R; ++r) memories[r]->Commit(span[r], rows[r], batch[r].chunk != nullptr);
  return results;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateLayeredBackend(std::shared_ptr<const ModelFile> model,
                                                              std::unique_ptr<ArchModel> arch, FamilyMemory memory,
                                                              const BackendOptions& options,
                                                              std::unique_ptr<PackedWeights> packed) {
  if (model == nullptr || arch == nullptr) return absl::InvalidArgumentError("no model");
  if (options.max_context < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_context ", options.max_context, " is negative"));
  }
  absl::StatusOr<std::unique_ptr<LayerMemory>> fresh = memory.create(nullptr);
  if (!fresh.ok()) return fresh.status();
  const MemoryCapabilities caps = (*fresh)->caps();
  return std::unique_ptr<Backend>(
      new LayeredBackend(std::move(model), std::move(packed), std::move(arch), std::move(memory), caps, options));
}

}  // namespace cairn
