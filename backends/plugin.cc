#include "backends/plugin.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace cairn {

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
  if (info->abi_version != kBackendPluginAbiVersion) {
    return fail(absl::FailedPreconditionError(absl::StrCat(where, "plugin ABI version ", info->abi_version,
                                                           ", this server takes version ",
                                                           kBackendPluginAbiVersion, ": rebuild the plugin")));
  }
  if (info->toolchain == nullptr || std::string_view(info->toolchain) != __VERSION__) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat(where, "built with compiler '", info->toolchain != nullptr ? info->toolchain : "?",
                     "', this server with '", __VERSION__, "': rebuild the plugin")));
  }
  if (info->register_family == nullptr || info->family == nullptr) {
    return fail(absl::InvalidArgumentError(where + "the entry point names no family"));
  }
  if (absl::Status s = info->register_family(registry); !s.ok()) {
    return fail(absl::Status(s.code(), absl::StrCat(where, s.message())));
  }
  // Kept loaded for the life of the process: the registry now holds its code.
  return absl::OkStatus();
}

}  // namespace cairn
