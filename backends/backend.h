// A Backend is a loaded model plus the forward pass of one family, and the
// registry through which deployments pick a family for a model file.
#ifndef CAIRN_BACKENDS_BACKEND_H_
#define CAIRN_BACKENDS_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/model/gguf.h"

namespace cairn {

struct ModelInfo {
  std::string name;    // deployment name (file stem by default)
  std::string arch;    // general.architecture
  std::string family;  // "transformer", "swa", "recurrent", "hybrid"
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;               // width of embedding rows accepted by Forward
  bool accepts_embeddings = false;  // Forward takes embedding chunks (multimodal)
  MemoryCapabilities caps;          // of a fresh sequence
  // Forward honours SequenceRun::snapshot_rows (checkpoints inside a run).
  bool snapshots_within_run = false;
  size_t weight_bytes = 0;  // bytes of weights read per forward token
};

// A run of embedding rows (e.g. from a vision encoder) laid out as an
// nx * ny grid in row-major order. Rows get M-RoPE positions
// (p0, p0 + i / nx, p0 + i % nx); the chunk advances the position by
// max(nx, ny); attention inside the chunk is causal in row order.
struct EmbeddingChunk {
  const float* rows = nullptr;  // [nx * ny][n_embd]
  int32_t nx = 0;
  int32_t ny = 0;
  int32_t n_rows() const { return nx * ny; }
};

// One sequence's part of a Forward call: either tokens or one chunk.
struct SequenceRun {
  SequenceMemory* memory = nullptr;  // created by this backend's NewSequence
  // Must equal memory->next_pos(): explicit so that a caller that lost track
  // of a sequence gets an error instead of silently wrong positions.
  Pos start_pos = 0;
  std::span<const TokenId> tokens;        // text tokens at start_pos, start_pos+1, ...
  const EmbeddingChunk* chunk = nullptr;  // instead of tokens
  // Indices into the run (0 .. n_rows-1, ascending) whose logits are wanted.
  std::span<const int32_t> logit_rows;
  // Indices into a token run (0 .. n_rows-1, ascending) after which the
  // backend snapshots the memory, into RunLogits::snapshots: each equals
  // what Capture(kCheckpoint) would give after a run ending at that row
  // (position start_pos + row + 1). A checkpoint inside a prompt then costs
  // a copy instead of a separate Forward call that re-reads every weight.
  // Only where ModelInfo::snapshots_within_run; INVALID_ARGUMENT otherwise
  // and with a chunk.
  std::span<const int32_t> snapshot_rows;
};

// Logits of one run: values[i * n_vocab + v] for logit_rows[i].
struct RunLogits {
  int32_t n_rows = 0;
  int32_t n_vocab = 0;
  std::vector<float> values;
  std::vector<Snapshot> snapshots;  // one per SequenceRun::snapshot_rows entry
  std::span<const float> row(int32_t i) const {
    return std::span<const float>(values).subspan(static_cast<size_t>(i) * n_vocab, n_vocab);
  }
};

// Thread-safety: ModelInfo and NewSequence may be called from any thread;
// Forward calls must not run concurrently on the same memory. A backend may
// serialize Forward internally (it uses all its threads per call).
class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelInfo& info() const = 0;

  // A new, empty sequence memory (next_pos() == 0) owned by the caller.
  // RESOURCE_EXHAUSTED when it cannot be allocated.
  virtual absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() = 0;

  // Absorbs every run into its memory and returns the requested logits, one
  // RunLogits per run in order. Several sequences in one call give the same
  // results as each alone. All input is validated before any memory changes:
  // INVALID_ARGUMENT (token id out of range, wrong start_pos, empty run,
  // foreign memory, a memory appearing twice, logit row out of range, a chunk
  // given to a backend that takes none), RESOURCE_EXHAUSTED (beyond the
  // memory's capacity). On error no memory has changed.
  virtual absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) = 0;
};

// For backends' input validation: OK when `rows` (a run's logit_rows or
// snapshot_rows, named `what` in the error) ascend strictly within
// [0, n_rows); otherwise INVALID_ARGUMENT prefixed with `where`.
absl::Status ValidateRunRows(std::span<const int32_t> rows, int64_t n_rows, const char* what, const std::string& where);

// What one family's Forward accepts, for ValidateForwardBatch.
struct ForwardRules {
  int32_t n_vocab = 0;
  bool accepts_chunks = false;        // EmbeddingChunk runs (M-RoPE models)
  bool snapshots_within_run = false;  // SequenceRun::snapshot_rows
  // Positions a sequence may reach (and rows it may store); 0: no limit.
  int64_t capacity = 0;
};

// The checks of the Backend::Forward contract, shared by every family, made
// before anything changes. Per run, in order: a memory this backend created
// (`owned`), no memory twice, start_pos == next_pos(), tokens or a chunk
// (not both, not empty; chunks only where accepted, with positive sizes and
// rows), token ids in [0, n_vocab), logit rows, snapshot rows (only where
// supported, never in a chunk), and the run's end within capacity:
// positions, and with `stored_rows` (the rows a memory already stores, when
// a chunk stores more rows than positions it advances) rows too. Errors are
// INVALID_ARGUMENT, or RESOURCE_EXHAUSTED beyond capacity, prefixed
// "run i: ".
absl::Status ValidateForwardBatch(std::span<const SequenceRun> batch, const ForwardRules& rules,
                                  const std::function<bool(const SequenceMemory&)>& owned,
                                  const std::function<int64_t(const SequenceMemory&)>& stored_rows = {});

struct BackendOptions {
  std::string name;         // deployment name for ModelInfo
  int32_t n_threads = 0;    // 0 = all cores
  int32_t max_context = 0;  // 0 = the model's training context
  // true: every weight product keeps F32 activations, so logits match the
  // golden (exact-math) files to rounding. false (the default): products
  // with quantized weights (Q8_0, Q4_0, K-quants) quantize the activations
  // to 8 bits and run integer dot products, as llama.cpp does: 2-3x faster
  // prompts, logits within the 8-bit rounding (MatMulPrecision in
  // backends/kernels/matmul.h). F32/F16 weights are exact either way.
  bool exact_activations = false;
  // With 8-bit activations, quantized matrices are repacked at load into
  // the layout the CPU's integer kernels read fastest (same results, faster
  // decode; the copies replace the file's pages in resident memory, and
  // loading takes a pass over the weights). false keeps the file's rows.
  bool pack_weights = true;
};

// Builds a backend for a model file of one family.
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(std::shared_ptr<const ModelFile> model,
                                                                              const BackendOptions& options)>;

// A family as the registry takes it: its name, the architectures it serves
// (general.architecture values) and the factory of its backends. Each family
// library provides one (e.g. RecurrentFamily() in
// backends/recurrent/recurrent_backend.h), and so does its plugin
// (backends/plugin.h).
struct BackendFamily {
  std::string name;
  std::vector<std::string> archs;
  BackendFactory create;
};

// Maps family names to factories and architectures to families. Families
// register explicitly (RegisterBuiltinBackends), no static initializers.
// Not thread-safe during registration; read-only use afterwards is.
class BackendRegistry {
 public:
  // ALREADY_EXISTS when the family or one of the archs is taken.
  absl::Status Register(const std::string& family, const std::vector<std::string>& archs, BackendFactory factory);
  absl::Status Register(const BackendFamily& family) { return Register(family.name, family.archs, family.create); }

  // Family for a GGUF general.architecture; NOT_FOUND naming the arch.
  absl::StatusOr<std::string> FamilyForArch(const std::string& arch) const;
  std::vector<std::string> Families() const;
  std::vector<std::string> Archs() const;

  // Creates a backend; the family comes from general.architecture unless
  // `family_override` is non-empty (NOT_FOUND for an unknown family).
  absl::StatusOr<std::unique_ptr<Backend>> Create(std::shared_ptr<const ModelFile> model, const BackendOptions& options,
                                                  const std::string& family_override = "") const;

 private:
  std::map<std::string, BackendFactory> factories_;
  std::map<std::string, std::string> arch_to_family_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_BACKEND_H_
