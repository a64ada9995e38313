// Backend families as loadable plugins: the contract between a server and a
// family built as a shared library (libcairn_<family>_plugin.so), so that a
// deployment ships only the families it serves (cairn-server-core plus the
// plugins it names with --backend-plugin=PATH).
//
// The contract:
// - A plugin exports exactly one symbol, the entry point
//     extern "C" const cairn::BackendPluginInfo* cairn_backend_plugin();
//   (define it with CAIRN_BACKEND_PLUGIN below). It returns a pointer to
//   static data, and does nothing else: no static initializer of a plugin
//   may register anything.
// - BackendPluginInfo::abi_version comes first and is read before anything
//   else: kBackendPluginAbiVersion of the plugin's build. A server accepts
//   only its own version, and only a plugin built with the same compiler
//   version (`toolchain`), because the interfaces crossing the boundary are
//   C++ (BackendRegistry, Backend, SequenceMemory, ModelFile, absl::Status)
//   and their layout is the compiler's and the standard library's.
//   Bump kBackendPluginAbiVersion whenever any type reachable from
//   backends/backend.h or backends/memory.h changes layout or meaning.
// - register_family registers one family (its name, its architectures and
//   its factory) into the registry it is given, as the built-in
//   Register<Family>Family functions do, and nothing else.
// - The server keeps the library loaded for the life of the process: the
//   registry's factories, the backends and the memories they create are the
//   plugin's code.
#ifndef CAIRN_BACKENDS_PLUGIN_H_
#define CAIRN_BACKENDS_PLUGIN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "backends/backend.h"

namespace cairn {

inline constexpr uint32_t kBackendPluginAbiVersion = 1;
inline constexpr char kBackendPluginEntryPoint[] = "cairn_backend_plugin";

struct BackendPluginInfo {
  uint32_t abi_version;   // first: read before any other field
  const char* toolchain;  // __VERSION__ of the compiler that built the plugin
  const char* family;     // the family it registers
  absl::Status (*register_family)(BackendRegistry& registry);
};

// Loads the plugin at `path` and registers its family into `registry`.
// Errors, after which nothing is registered and the library is unloaded:
// NOT_FOUND when the file does not exist; INVALID_ARGUMENT when it is not a
// loadable shared library or has no entry point; FAILED_PRECONDITION for an
// ABI version or toolchain other than this build's; ALREADY_EXISTS when its
// family, or one of its architectures, is registered already. Every message
// names the path.
absl::Status LoadBackendPlugin(const std::string& path, BackendRegistry& registry);

}  // namespace cairn

// Defines the entry point of a plugin registering `family` with
// `register_fn` (an absl::Status(BackendRegistry&) function). Use once, in
// the plugin's own source file (backends/<family>/plugin.cc).
#define CAIRN_BACKEND_PLUGIN(family, register_fn)                                                \
  extern "C" __attribute__((visibility("default"))) const ::cairn::BackendPluginInfo*            \
  cairn_backend_plugin() {                                                                       \
    static const ::cairn::BackendPluginInfo info{::cairn::kBackendPluginAbiVersion, __VERSION__, \
                                                 family, register_fn};                           \
    return &info;                                                                                \
  }

#endif  // CAIRN_BACKENDS_PLUGIN_H_
