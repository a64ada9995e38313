#include "backends/backend.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cairn {

absl::Status ValidateRunRows(std::span<const int32_t> rows, int64_t n_rows, const char* what,
                             const std::string& where) {
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= n_rows || (k > 0 && rows[k] <= rows[k - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(where, what, " row ", rows[k], " (entry ", k,
                                                     ") is out of range or not ascending for a run of ", n_rows,
                                                     " rows"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateForwardBatch(std::span<const SequenceRun> batch, const ForwardRules& rules,
                                  const std::function<bool(const SequenceMemory&)>& owned,
                                  const std::function<int64_t(const SequenceMemory&)>& stored_rows) {
  std::unordered_set<const SequenceMemory*> seen;
  for (size_t r = 0; r < batch.size(); ++r) {
    const SequenceRun& run = batch[r];
    const std::string where = absl::StrCat("run ", r, ": ");
    if (run.memory == nullptr) return absl::InvalidArgumentError(where + "no memory");
    if (!owned(*run.memory)) return absl::InvalidArgumentError(where + "memory was not created by this backend");
    if (!seen.insert(run.memory).second) {
      return absl::InvalidArgumentError(where + "the same memory appears twice in one batch");
    }
    if (run.start_pos != run.memory->next_pos()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "start_pos ", run.start_pos, " but the sequence is at ", run.memory->next_pos()));
    }
    int64_t n_rows = 0, span = 0;
    if (run.chunk != nullptr) {
      if (!rules.accepts_chunks) {
        return absl::InvalidArgumentError(where + "this model takes no embedding chunks (text tokens only)");
      }
      if (!run.tokens.empty()) return absl::InvalidArgumentError(where + "a run has tokens or a chunk, not both");
      const EmbeddingChunk& c = *run.chunk;
      if (c.nx <= 0 || c.ny <= 0 || c.rows == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "embedding chunk of ", c.nx, " x ", c.ny, " needs positive sizes and rows"));
      }
      n_rows = static_cast<int64_t>(c.nx) * c.ny;
      span = std::max(c.nx, c.ny);
    } else {
      if (run.tokens.empty()) return absl::InvalidArgumentError(where + "empty run");
      for (size_t i = 0; i < run.tokens.size(); ++i) {
        if (run.tokens[i] < 0 || run.tokens[i] >= rules.n_vocab) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, "token ", i, " has id ", run.tokens[i], " outside [0, ", rules.n_vocab, ")"));
        }
      }
      n_rows = static_cast<int64_t>(run.tokens.size());
      span = n_rows;
    }
    if (absl::Status s = ValidateRunRows(run.logit_rows, n_rows, "logit", where); !s.ok()) return s;
    if (!run.snapshot_rows.empty()) {
      if (!rules.snapshots_within_run) {
        return absl::InvalidArgumentError(
            where + "this backend takes no snapshot rows (ModelInfo::snapshots_within_run is false)");
      }
      if (run.chunk != nullptr) {
        return absl::InvalidArgumentError(
            where + "snapshot rows inside an embedding chunk (a chunk is checkpointed only as a whole)");
      }
      if (absl::Status s = ValidateRunRows(run.snapshot_rows, n_rows, "snapshot", where); !s.ok()) return s;
    }
    if (rules.capacity > 0) {
      const int64_t end_pos = static_cast<int64_t>(run.start_pos) + span;
      const int64_t end_rows = stored_rows ? stored_rows(*run.memory) + n_rows : end_pos;
      if (end_pos > rules.capacity || end_rows > rules.capacity) {
        return absl::ResourceExhaustedError(absl::StrCat(where, "the run ends at position ", end_pos, " (", end_rows,
                                                         " rows), beyond the context of ", rules.capacity));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status BackendRegistry::Register(const std::string& family, const std::vector<std::string>& archs,
                                       BackendFactory factory) {
  if (factories_.count(family)) {
    return absl::AlreadyExistsError(absl::StrCat("backend family '", family, "' is already registered"));
  }
  for (const std::string& arch : archs) {
    auto it = arch_to_family_.find(arch);
    if (it != arch_to_family_.end()) {
      return absl::AlreadyExistsError(
          absl::StrCat("architecture '", arch, "' is already served by family '", it->second, "'"));
    }
  }
  factories_[family] = std::move(factory);
  for (const std::string& arch : archs) arch_to_family_[arch] = family;
  return absl::OkStatus();
}

absl::StatusOr<std::string> BackendRegistry::FamilyForArch(const std::string& arch) const {
  auto it = arch_to_family_.find(arch);
  if (it == arch_to_family_.end()) {
    return absl::NotFoundError(absl::StrCat("no backend family serves architecture '", arch,
                                            "' (supported: ", absl::StrJoin(Archs(), ", "), ")"));
  }
  return it->second;
}

std::vector<std::string> BackendRegistry::Families() const {
  std::vector<std::string> out;
  for (const auto& [family, factory] : factories_) out.push_back(family);
  return out;
}

std::vector<std::string> BackendRegistry::Archs() const {
  std::vector<std::string> out;
  for (const auto& [arch, family] : arch_to_family_) out.push_back(arch);
  return out;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(std::shared_ptr<const ModelFile> model,
                                                                 const BackendOptions& options,
                                                                 const std::string& family_override) const {
  std::string family = family_override;
  if (family.empty()) {
    absl::StatusOr<std::string> arch = model->Architecture();
    if (!arch.ok()) return arch.status();
    absl::StatusOr<std::string> found = FamilyForArch(*arch);
    if (!found.ok()) return found.status();
    family = *found;
  }
  auto it = factories_.find(family);
  if (it == factories_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown backend family '", family, "' (registered: ", absl::StrJoin(Families(), ", "), ")"));
  }
  return it->second(std::move(model), options);
}

}  // namespace cairn
