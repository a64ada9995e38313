#include "backends/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cairn {
namespace {

// The boundary types the plugin's build laid out otherwise, with both
// sizes, or "" when none.
std::string LayoutMismatch(const BackendPluginInfo& info) {
  constexpr uint32_t kSizes[] = {CAIRN_BOUNDARY_TYPES(CAIRN_BOUNDARY_TYPE_SIZE)};
  std::vector<std::string> differ;
  for (size_t i = 0; i < kNumBoundaryTypes; ++i) {
    if (info.boundary_type_sizes[i] != kSizes[i]) {
      differ.push_back(
          absl::StrCat(kBoundaryTypeNames[i], " ", info.boundary_type_sizes[i], " bytes (here ", kSizes[i], ")"));
    }
  }
  return absl::StrJoin(differ, ", ");
}

// FAILED_PRECONDITION naming what differs between the plugin's build and
// this one, or OK. The ABI version first: only with an equal version are the
// other fields where this server reads them.
absl::Status CheckBuild(const BackendPluginInfo& info, const std::string& where) {
  if (info.abi_version != kBackendPluginAbiVersion) {
    return absl::FailedPreconditionError(absl::StrCat(where, "plugin ABI version ", info.abi_version,
                                                      ", this server takes version ", kBackendPluginAbiVersion,
                                                      ": rebuild the plugin"));
  }
  if (const std::string layout = LayoutMismatch(info); !layout.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "built with other type layouts than this server (", layout, "): rebuild the plugin"));
  }
  if (info.abseil_lts_version != kAbseilLtsVersion) {
    return absl::FailedPreconditionError(absl::StrCat(where, "built against abseil LTS ", info.abseil_lts_version,
                                                      ", this server against ", kAbseilLtsVersion,
                                                      ": rebuild the plugin"));
  }
  if (info.toolchain == nullptr || std::string_view(info.toolchain) != __VERSION__) {
    return absl::FailedPreconditionError(absl::StrCat(where, "built with compiler '",
                                                      info.toolchain != nullptr ? info.toolchain : "?",
                                                      "', this server with '", __VERSION__, "': rebuild the plugin"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadBackendPlugin(const std::string& path, BackendRegistry& registry) {
  const std::string where = absl::StrCat("backend plugin '", path, "': ");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(where + "no such file");
  }
  // RTLD_LOCAL: the plugin's copy of the shared libraries stays its own.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::InvalidArgumentError(
        absl::StrCat(where, "not a loadable shared library (", err != nullptr ? err : "unknown error", ")"));
  }
  auto fail = [handle](absl::Status s) {
    dlclose(handle);
    return s;
  };
  using EntryPoint = const BackendPluginInfo* (*)();
  auto entry = reinterpret_cast<EntryPoint>(dlsym(handle, kBackendPluginEntryPoint));
  if (entry == nullptr) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat(where, "no entry point '", kBackendPluginEntryPoint, "' (not a cairn backend plugin)")));
  }
  const BackendPluginInfo* info = entry();
  if (info == nullptr) return fail(absl::InvalidArgumentError(where + "the entry point returned nothing"));
  if (absl::Status s = CheckBuild(*info, where); !s.ok()) return fail(s);
  if (info->family == nullptr) return fail(absl::InvalidArgumentError(where + "the entry point names no family"));
  if (absl::Status s = registry.Register(info->family()); !s.ok()) {
    return fail(absl::Status(s.code(), absl::StrCat(where, s.message())));
  }
  // Kept loaded for the life of the process: the registry now holds its code.
  return absl::OkStatus();
}

}  // namespace cairn
