#include "backends/backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cairn {

absl::Status ValidateRunRows(std::span<const int32_t> rows, int64_t n_rows, const char* what,
                             const std::string& where) {
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= n_rows || (k > 0 && rows[k] <= rows[k - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(where, what, " row ", rows[k], " (entry ", k,
                                                     ") is out of range or not ascending for a run of ",
                                                     n_rows, " rows"));
    }
  }
  return absl::OkStatus();
}

absl::Status BackendRegistry::Register(const std::string& family,
                                       const std::vector<std::string>& archs,
                                       BackendFactory factory) {
  if (factories_.count(family)) {
    return absl::AlreadyExistsError(absl::StrCat("backend family '", family, "' is already registered"));
  }
  for (const std::string& arch : archs) {
    auto it = arch_to_family_.find(arch);
    if (it != arch_to_family_.end()) {
      return absl::AlreadyExistsError(absl::StrCat("architecture '", arch,
                                                   "' is already served by family '", it->second, "'"));
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

absl::StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(
    std::shared_ptr<const ModelFile> model, const BackendOptions& options,
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
    return absl::NotFoundError(absl::StrCat("unknown backend family '", family, "' (registered: ",
                                            absl::StrJoin(Families(), ", "), ")"));
  }
  return it->second(std::move(model), options);
}

}  // namespace cairn
