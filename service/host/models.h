// The models a server serves: each one loaded file, its backend, tokenizer,
// checkpoint engine and scheduler, under a deployment name.
#ifndef CAIRN_SERVICE_HOST_MODELS_H_
#define CAIRN_SERVICE_HOST_MODELS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"
#include "chat/chat_template.h"
#include "checkpoint/engine.h"
#include "checkpoint/options.h"
#include "checkpoint/store.h"

namespace cairn::service {

class Scheduler;
struct SchedulerOptions;

// "NAME=PATH" or "NAME=PATH:family"; a bare "PATH" names the model after the
// file stem. INVALID_ARGUMENT for an empty name or path.
struct ModelSpec {
  std::string name;
  std::string path;
  std::string family;  // empty: from general.architecture
  // The path names a built-in model (BuiltinModels); Load also takes a path
  // that BuiltinModels::contains as one.
  bool builtin = false;
};
absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& text);

// One served model. Immutable after load except through its scheduler and
// engine, which are thread-safe.
struct ServedModel {
  ~ServedModel();

  std::string name;
  std::string path;  // "" for built-in models
  bool synthetic = false;
  std::shared_ptr<const ModelFile> file;
  // Member order is destruction order in reverse: the scheduler stops
  // before the engine goes, the engine before the backend.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tokenizer;  // null: token ids only
  // The --chat-template file given for the model, else its own
  // tokenizer.chat_template (or a built-in family it falls back to, see
  // chat_template.h); the plain template when it has none or one that
  // neither runs nor shows a family (a warning in the log says why).
  std::optional<ChatTemplate> chat_template;
  std::unique_ptr<checkpoint::CheckpointEngine> engine;
  std::unique_ptr<Scheduler> scheduler;

  // What one sequence's memory holds (SequenceMemory::Bytes(kFull)), as an
  // upper bound: a fresh sequence's bytes plus bytes per position, measured
  // at load with a two-token probe (exact for KV caches and recurrent state;
  // a sliding window's ring stops growing at its width, so beyond it this
  // overestimates).
  size_t sequence_base_bytes = 0;
  size_t sequence_bytes_per_position = 0;

  // What the service keeps per symbol (token) of a live sequence besides
  // its memory, which a recurrent model's fixed-size state does not grow
  // with: the session's history (24 bytes an item), the engine's symbol
  // path (12) and prefix-index path (8), and while a request runs its
  // copies (the job's prompt, the engine's prompt, the sampler's history,
  // the streamed ids), each in a vector that may hold twice its size.
  // Measured by tests/service/e2e/memory_budget_test.cc
  // (BookkeepingPerTokenIsWithinTheCharge: mallinfo2 over 8,300 tokens,
  // just past a doubling of the vectors, their worst case): about 70 bytes
  // a token held by an idle session and 100-106 at a running request's
  // peak; the charge leaves half as much again for what that request does
  // not exercise (logprobs, stop strings, parsed output). Not counted: a
  // multimodal chunk's embedding rows (kept in the history, charged per
  // row like a token).
  static constexpr size_t kBookkeepingBytesPerSymbol = 160;

  const ModelInfo& info() const { return backend->info(); }
  // Most positions a sequence may hold.
  Pos context_length() const;
  // The bound above for a sequence of `rows` positions (a multimodal chunk
  // counts as its rows, at least its positions), plus the bookkeeping of as
  // many symbols; saturates. What a request reserves before it runs.
  size_t SequenceBytes(int64_t rows) const;
  // What a live sequence holds now: its memory's bytes plus the bookkeeping
  // of its symbols or of `history_symbols` (the session's history, which a
  // turn that did not end OK leaves shorter than the sequence), whichever
  // is more. The caller has `seq` to itself (a session's lease).
  size_t HeldBytes(checkpoint::Sequence& seq, size_t history_symbols) const;
};

// Models built in memory instead of read from a file. cairn's synthetic demo
// models (service/programs/demo_models.h) are not part of the production
// libraries: the programs and tests that serve them pass them in here.
// Empty: every path names a file.
struct BuiltinModels {
  // Served when no model is given (those whose family the build lacks are
  // skipped).
  std::vector<std::string> served_by_default;
  std::function<bool(const std::string& name)> contains;
  // The model `name` names; NOT_FOUND for a name it does not contain.
  std::function<absl::StatusOr<std::shared_ptr<const ModelFile>>(const std::string& name)> build;
};

struct ModelsOptions {
  // Backend families loaded from plugin libraries (backends/plugin.h),
  // beside the ones linked in; a plugin that cannot be loaded fails
  // Server::Create, which registers the families Load uses.
  std::vector<std::string> backend_plugins;
  int32_t threads = 0;  // per backend; 0: all cores
  int32_t max_context = 0;
  bool exact_activations = false;  // BackendOptions::exact_activations of every model
  bool pack_weights = true;        // BackendOptions::pack_weights of every model
  checkpoint::CheckpointOptions checkpoint;
  BuiltinModels builtin;
  // Model name -> a Jinja chat template file that replaces the model's own
  // (--chat-template=NAME=FILE). Load fails with INVALID_ARGUMENT for a
  // name no model has or a template that does not parse, NOT_FOUND for a
  // file it cannot read.
  std::map<std::string, std::string> chat_template_files;
  // strftime_now's clock in chat templates (local civil time); unset: the
  // machine's.
  std::function<absl::CivilSecond()> chat_template_clock;
};

// Thread-safe after Load: read-only.
class ModelRegistry final {
 public:
  // Loads every spec (options.builtin.served_by_default when `specs` is
  // empty) with the backend of its family in `families`. One checkpoint
  // store (one RAM budget) is shared by all models. Errors from opening,
  // recognizing or loading a file name the model; ALREADY_EXISTS for a
  // duplicate name.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(const std::vector<ModelSpec>& specs,
                                                             const ModelsOptions& options,
                                                             const SchedulerOptions& scheduler_options,
                                                             const BackendRegistry& families);
  ~ModelRegistry();

  // NOT_FOUND naming the model and the served ones.
  absl::StatusOr<ServedModel*> Find(const std::string& name) const;
  std::vector<ServedModel*> All() const;
  checkpoint::CheckpointStore* store() const { return store_.get(); }

 private:
  ModelRegistry() = default;
  std::shared_ptr<checkpoint::CheckpointStore> store_;
  std::map<std::string, std::unique_ptr<ServedModel>> models_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_MODELS_H_
