#include "service/host/models.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/host/log.h"
#include "service/scheduling/fair_backend.h"
#include "service/scheduling/scheduler.h"

namespace cairn::service {

absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& text) {
  ModelSpec spec;
  std::string rest = text;
  const size_t eq = text.find('=');
  if (eq != std::string::npos) {
    spec.name = text.substr(0, eq);
    rest = text.substr(eq + 1);
  }
  // A trailing ":family" (a word without '/', '.'), so that paths with ':'
  // elsewhere still work.
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    const std::string fam = rest.substr(colon + 1);
    if (!fam.empty() && fam.find_first_of("/.") == std::string::npos) {
      spec.family = fam;
      rest = rest.substr(0, colon);
    }
  }
  spec.path = rest;
  if (spec.path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--model '", text, "': empty path"));
  }
  if (eq == std::string::npos) spec.name = std::filesystem::path(spec.path).stem().string();
  if (spec.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--model '", text, "': empty name"));
  }
  return spec;
}

ServedModel::~ServedModel() {
  scheduler.reset();
  engine.reset();
}

size_t ServedModel::SequenceBytes(int64_t rows) const {
  if (rows <= 0) return sequence_base_bytes;
  const size_t n = static_cast<size_t>(rows);
  const size_t per = sequence_bytes_per_position + kBookkeepingBytesPerSymbol;
  if (n > (SIZE_MAX - sequence_base_bytes) / per) return SIZE_MAX;
  return sequence_base_bytes + n * per;
}

size_t ServedModel::HeldBytes(checkpoint::Sequence& seq, size_t history_symbols) const {
  const size_t symbols = std::max(history_symbols, seq.history().size());
  const size_t memory = seq.memory()->Bytes(SnapshotScope::kFull);
  if (symbols > (SIZE_MAX - memory) / kBookkeepingBytesPerSymbol) return SIZE_MAX;
  return memory + symbols * kBookkeepingBytesPerSymbol;
}

namespace {

// Measures ServedModel::sequence_base_bytes and _per_position on a probe
// sequence: its bytes fresh, after one token and after two (one token per
// Forward call, token id 0, so the second is a decode step). A model whose
// context holds a single position is measured from the first two points.
absl::Status MeasureSequenceBytes(ServedModel& m) {
  auto mem = m.backend->NewSequence();
  if (!mem.ok()) return mem.status();
  SequenceMemory& probe = **mem;
  size_t bytes[3] = {probe.Bytes(SnapshotScope::kFull), 0, 0};
  int measured = 1;
  const TokenId token = 0;
  const int32_t row = 0;
  for (Pos p = 0; p < 2 && p + 1 <= m.context_length(); ++p) {
    SequenceRun run;
    run.memory = &probe;
    run.start_pos = p;
    run.tokens = std::span<const TokenId>(&token, 1);
    run.logit_rows = std::span<const int32_t>(&row, 1);
    auto out = m.backend->Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) {
      if (p > 0) break;
      return out.status();
    }
    bytes[measured++] = probe.Bytes(SnapshotScope::kFull);
  }
  // Per position: the last step's growth (a decode step); the base: the
  // least that puts every measured point under the bound (a fresh memory
  // may allocate its state on the first token).
  const size_t per =
      measured >= 2 && bytes[measured - 1] > bytes[measured - 2] ? bytes[measured - 1] - bytes[measured - 2] : 0;
  size_t base = 0;
  for (int i = 0; i < measured; ++i) {
    const size_t below = static_cast<size_t>(i) * per;
    base = std::max(base, bytes[i] - std::min(bytes[i], below));
  }
  m.sequence_bytes_per_position = per;
  m.sequence_base_bytes = base;
  return absl::OkStatus();
}

// The file a spec names, or the built-in model it names.
absl::StatusOr<std::shared_ptr<const ModelFile>> OpenModel(const ModelSpec& spec, const BuiltinModels& builtin) {
  if (spec.builtin) {
    if (!builtin.build) return absl::NotFoundError(absl::StrCat("no built-in model '", spec.path, "'"));
    return builtin.build(spec.path);
  }
  absl::StatusOr<std::unique_ptr<ModelFile>> file = ModelFile::Open(spec.path);
  if (!file.ok()) return file.status();
  return std::shared_ptr<const ModelFile>(std::move(*file));
}

// The chat template messages render with (see ServedModel::chat_template).
absl::Status ChooseChatTemplate(ServedModel& m, const ModelsOptions& options) {
  ChatTemplateOptions template_options;
  template_options.now = options.chat_template_clock;
  if (auto file = options.chat_template_files.find(m.name); file != options.chat_template_files.end()) {
    std::ifstream in(file->second, std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    if (!in.is_open() || in.bad()) {
      return absl::NotFoundError(absl::StrCat("model '", m.name, "': cannot read chat template ", file->second));
    }
    template_options.override_source = source.str();
    template_options.override_name = "file:" + file->second;
  }
  auto tmpl = ChatTemplate::FromMetadata(m.file->metadata(), template_options);
  if (!tmpl.ok() && template_options.override_source.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "' chat template ",
                                                   template_options.override_name, ": ", tmpl.status().message()));
  }
  if (!tmpl.ok()) {
    LogLine(LogLevel::kWarning, absl::StrCat("warning chat_template model=", LogValue(m.name), " msg=",
                                             LogValue(absl::StrCat("plain template: ", tmpl.status().message()))));
    tmpl = ChatTemplate::FromName("plain");
  }
  if (tmpl.ok()) m.chat_template = *tmpl;
  return absl::OkStatus();
}

// What serves requests on a loaded backend: the tokenizer (none: token ids
// only) and chat template, the checkpoint engine on the shared store, the
// scheduler.
absl::Status Equip(ServedModel& m, const std::shared_ptr<checkpoint::CheckpointStore>& store,
                   const ModelsOptions& options, const SchedulerOptions& scheduler_options) {
  auto tok = Tokenizer::Create(*m.file);
  if (tok.ok()) {
    m.tokenizer = std::move(*tok);
  } else if (tok.status().code() != absl::StatusCode::kNotFound) {
    return absl::Status(tok.status().code(), absl::StrCat("model '", m.name, "' tokenizer: ", tok.status().message()));
  }
  if (m.tokenizer != nullptr) {
    if (absl::Status st = ChooseChatTemplate(m, options); !st.ok()) return st;
  } else if (options.chat_template_files.count(m.name)) {
    return absl::InvalidArgumentError(absl::StrCat("--chat-template for model '", m.name, "', which has no tokenizer"));
  }
  auto engine = checkpoint::CheckpointEngine::Create(m.backend.get(), store, options.checkpoint);
  if (!engine.ok()) return engine.status();
  m.engine = std::move(*engine);
  SchedulerModel runs;
  runs.name = m.name;
  runs.backend = m.backend.get();
  runs.engine = m.engine.get();
  runs.tokenizer = m.tokenizer.get();
  runs.context_length = m.context_length();
  auto sched = Scheduler::Create(runs, scheduler_options);
  if (!sched.ok()) return sched.status();
  m.scheduler = std::move(*sched);
  return absl::OkStatus();
}

}  // namespace

Pos ServedModel::context_length() const {
  const int32_t n = info().n_ctx_train;
  return n > 0 ? n : (1 << 20);
}

ModelRegistry::~ModelRegistry() { models_.clear(); }

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(const std::vector<ModelSpec>& specs_in,
                                                                   const ModelsOptions& options,
                                                                   const SchedulerOptions& scheduler_options,
                                                                   const BackendRegistry& families) {
  std::unique_ptr<ModelRegistry> reg(new ModelRegistry());

  const BuiltinModels& builtin = options.builtin;
  std::vector<ModelSpec> specs = specs_in;
  for (ModelSpec& spec : specs) spec.builtin |= builtin.contains && builtin.contains(spec.path);
  if (specs.empty()) {
    for (const std::string& name : builtin.served_by_default) {
      ModelSpec s;
      s.name = s.path = name;
      s.builtin = true;
      specs.push_back(s);
    }
  }
  if (options.checkpoint.enabled) {
    checkpoint::StoreOptions store_options = options.checkpoint.store();
    // A disk-tier file the store drops or cannot use is the operator's only
    // sign of a failing disk: one warning line each.
    store_options.on_warning = [](const std::string& message) {
      LogLine(LogLevel::kWarning, "warning checkpoint_store msg=" + LogValue(message));
    };
    auto store = checkpoint::CheckpointStore::Create(store_options);
    if (!store.ok()) return store.status();
    reg->store_ = std::move(*store);
  }
  for (const auto& [name, file] : options.chat_template_files) {
    if (std::none_of(specs.begin(), specs.end(), [&](const ModelSpec& spec) { return spec.name == name; })) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template for '", name, "', which no model is named"));
    }
  }
  for (const ModelSpec& spec : specs) {
    if (reg->models_.count(spec.name)) {
      return absl::AlreadyExistsError(absl::StrCat("model name '", spec.name, "' given twice"));
    }
    auto m = std::make_unique<ServedModel>();
    m->name = spec.name;
    auto file = OpenModel(spec, builtin);
    if (!file.ok()) {
      return absl::Status(file.status().code(), absl::StrCat("model '", spec.name, "': ", file.status().message()));
    }
    m->file = std::move(*file);
    m->synthetic = spec.builtin;
    if (!spec.builtin) m->path = spec.path;
    BackendOptions bo;
    bo.name = spec.name;
    bo.n_threads = options.threads;
    bo.max_context = options.max_context;
    bo.exact_activations = options.exact_activations;
    bo.pack_weights = options.pack_weights;
    auto backend = families.Create(m->file, bo, spec.family);
    if (!backend.ok()) {
      // Skip built-in models whose family this build lacks; a user's model
      // must load.
      if (spec.builtin && specs_in.empty()) continue;
      return absl::Status(backend.status().code(),
                          absl::StrCat("model '", spec.name, "': ", backend.status().message()));
    }
    m->backend = MakeFairBackend(std::move(*backend));
    if (absl::Status st = MeasureSequenceBytes(*m); !st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat("model '", spec.name, "': measuring a sequence's memory: ", st.message()));
    }
    if (absl::Status st = Equip(*m, reg->store_, options, scheduler_options); !st.ok()) return st;
    reg->models_.emplace(spec.name, std::move(m));
  }
  if (reg->models_.empty()) return absl::NotFoundError("no model could be loaded");
  return reg;
}

absl::StatusOr<ServedModel*> ModelRegistry::Find(const std::string& name) const {
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, m] : models_) names.push_back(n);
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' is not served (served: ", absl::StrJoin(names, ", "), ")"));
  }
  return it->second.get();
}

std::vector<ServedModel*> ModelRegistry::All() const {
  std::vector<ServedModel*> out;
  for (const auto& [n, m] : models_) out.push_back(m.get());
  return out;
}

}  // namespace cairn::service
