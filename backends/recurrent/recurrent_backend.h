// The recurrent family: pure state-space models (archs `mamba2`, `mamba`).
// Every layer is RMSNorm -> Mamba mixer -> residual add; the memory of a
// sequence is the per-layer conv + SSM state (RecurrentMemory).
#ifndef CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_
#define CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/recurrent/mamba_mixer.h"
#include "backends/recurrent/recurrent_memory.h"

namespace cairn {

inline constexpr char kRecurrentFamily[] = "recurrent";

// Thread-safety: info() and NewSequence() from any thread; Forward calls are
// serialized internally (each uses every thread of the pool).
class RecurrentBackend final : public Backend {
 public:
  // Loads `model` (general.architecture `mamba2` or `mamba`). Errors:
  // INVALID_ARGUMENT for another architecture or inconsistent metadata and
  // tensor shapes (naming the key or tensor), NOT_FOUND for a missing tensor.
  static absl::StatusOr<std::unique_ptr<RecurrentBackend>> Create(std::shared_ptr<const ModelFile> model,
                                                                  const BackendOptions& options);

  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override;
  // As Backend::Forward. A run's position limit is options.max_context when
  // set (RESOURCE_EXHAUSTED beyond it); a recurrent state itself has no
  // capacity limit.
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override;

  const MambaGeometry& geometry() const { return geometry_; }
  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  // The fingerprint of model + geometry that this backend's snapshots carry.
  uint64_t layout() const { return layout_; }

 private:
  struct Layer {
    std::vector<float> attn_norm;
    MambaMixerWeights mixer;
  };

  // Tokens [begin, begin + n) of batch[run].
  struct Segment {
    size_t run = 0;
    int64_t begin = 0;
    int64_t n = 0;
  };
  // Rows per micro-batch: large enough for sgemm to reach its peak on the
  // projections, small enough that the scratch stays tens of MiB.
  static constexpr int64_t kUbatchRows = 512;

  RecurrentBackend(std::shared_ptr<const ModelFile> model, const BackendOptions& options);
  absl::Status Load();
  absl::Status Validate(std::span<const SequenceRun> batch) const;
  // Runs the segments through every layer and writes the logits of the
  // requested rows they contain into `results` (next_logit[run] tracks how
  // many of a run's logit rows are done).
  void RunUbatch(std::span<const Segment> segments, std::span<const SequenceRun> batch,
                 std::span<RecurrentMemory* const> memories, std::vector<RunLogits>& results,
                 std::vector<size_t>& next_logit);

  std::shared_ptr<const ModelFile> model_;
  BackendOptions options_;
  ModelInfo info_;
  MambaGeometry geometry_;
  std::vector<Layer> layers_;
  const TensorInfo* token_embd_ = nullptr;
  std::vector<float> output_norm_;
  WeightMatrix output_;
  uint64_t layout_ = 0;

  std::mutex forward_mu_;  // serializes Forward: one job at a time on pool_
  std::unique_ptr<ThreadPool> pool_;
  // Work buffers reused across micro-batches and calls (under forward_mu_).
  MambaMixerScratch mixer_scratch_;
  MambaMixerScratch ubatch_scratch_;  // slots 0, 1: normalized input, mixer output
};

// Registers family "recurrent" for archs `mamba2` and `mamba`.
absl::Status RegisterRecurrentFamily(BackendRegistry& registry);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_RECURRENT_RECURRENT_BACKEND_H_
