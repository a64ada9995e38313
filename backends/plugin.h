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
// - The interfaces crossing the boundary are C++ (BackendFamily, Backend,
//   SequenceMemory, ModelFile, absl::Status ...): both sides must lay them
//   out alike. So the info carries, in plain fields read before anything of
//   the plugin runs, what a mismatch needs to be caught: the ABI version
//   (first, read before any other field), the size of every type crossing
//   the boundary as the plugin's build laid it out (CAIRN_BOUNDARY_TYPES),
//   the abseil LTS release it was built against, and its compiler. A server
//   loads only a plugin that agrees on all four, and says what differs.
//   Bump kBackendPluginAbiVersion whenever a type reachable from
//   backends/backend.h or backends/memory.h changes meaning, or the list of
//   CAIRN_BOUNDARY_TYPES or BackendPluginInfo changes.
// - `family` is called once every check passed; the server registers what
//   it returns (its name, architectures and factory), nothing else.
// - The server keeps the library loaded for the life of the process: the
//   registry's factories, the backends and the memories they create are the
//   plugin's code.
#ifndef CAIRN_BACKENDS_PLUGIN_H_
#define CAIRN_BACKENDS_PLUGIN_H_

#include <cstdint>
#include <string>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "backends/backend.h"

namespace cairn {

inline constexpr uint32_t kBackendPluginAbiVersion = 2;
inline constexpr char kBackendPluginEntryPoint[] = "cairn_backend_plugin";

#ifdef ABSL_LTS_RELEASE_VERSION
inline constexpr uint32_t kAbseilLtsVersion = ABSL_LTS_RELEASE_VERSION;
#else
inline constexpr uint32_t kAbseilLtsVersion = 0;  // a build of abseil's head, not an LTS release
#endif

// The types whose layout both sides share: the library types they are made
// of, and every type the server and a plugin pass to each other (by value,
// reference or pointer). X(type) for each, in a fixed order, named so that
// they resolve in any namespace.
// (Formatted by hand: clang-format does not reach a fixed point on it.)
// clang-format off
#define CAIRN_BOUNDARY_TYPES(X)                                                           \
  X(std::string) X(absl::Status)                                                          \
  X(cairn::BackendFactory) X(cairn::BackendFamily) X(cairn::BackendOptions)               \
  X(cairn::ModelInfo) X(cairn::MemoryCapabilities) X(cairn::SequenceRun)                  \
  X(cairn::EmbeddingChunk) X(cairn::RunLogits) X(cairn::Snapshot) X(cairn::ModelFile)     \
  X(cairn::GgufFile) X(cairn::TensorInfo) X(cairn::Metadata) X(cairn::MetadataValue)
// clang-format on

#define CAIRN_BOUNDARY_TYPE_NAME(T) #T,
inline constexpr const char* kBoundaryTypeNames[] = {CAIRN_BOUNDARY_TYPES(CAIRN_BOUNDARY_TYPE_NAME)};
#undef CAIRN_BOUNDARY_TYPE_NAME
inline constexpr size_t kNumBoundaryTypes = sizeof(kBoundaryTypeNames) / sizeof(kBoundaryTypeNames[0]);

// What a plugin tells about itself, in plain data that the server reads
// before running any of its code. The sizes are values inside this struct,
// computed where the struct is (the plugin), never a shared symbol: a
// symbol could be bound to another module's copy.
struct BackendPluginInfo {
  uint32_t abi_version;                             // first: read before any other field
  uint32_t abseil_lts_version;                      // kAbseilLtsVersion of the plugin's build
  const char* toolchain;                            // __VERSION__ of the compiler that built the plugin
  uint32_t boundary_type_sizes[kNumBoundaryTypes];  // sizeof each CAIRN_BOUNDARY_TYPES, in its build
  BackendFamily (*family)();                        // the family it serves
};

// Loads the plugin at `path` and registers its family into `registry`.
// Errors, after which nothing is registered and the library is unloaded:
// NOT_FOUND when the file does not exist; INVALID_ARGUMENT when it is not a
// loadable shared library or has no entry point; FAILED_PRECONDITION for a
// plugin built for another ABI version, with other type sizes (naming each
// type that differs and both sizes), against another abseil release or
// with another compiler; ALREADY_EXISTS when its family, or one of its
// architectures, is registered already. Every message names the path.
absl::Status LoadBackendPlugin(const std::string& path, BackendRegistry& registry);

}  // namespace cairn

// The info of a plugin whose family `family_fn` (a BackendFamily (*)())
// returns, with this build's ABI version, abseil release, compiler and
// boundary type sizes.
#define CAIRN_BOUNDARY_TYPE_SIZE(T) static_cast<uint32_t>(sizeof(T)),
#define CAIRN_BACKEND_PLUGIN_INFO(family_fn)                                    \
  ::cairn::BackendPluginInfo {                                                  \
    ::cairn::kBackendPluginAbiVersion, ::cairn::kAbseilLtsVersion, __VERSION__, \
        {CAIRN_BOUNDARY_TYPES(CAIRN_BOUNDARY_TYPE_SIZE)}, family_fn             \
  }

// Defines the entry point of a plugin serving the family `family_expr` (a
// BackendFamily expression, e.g. cairn::RecurrentFamily()). Use once, in the
// plugin's own source file (backends/<family>/plugin.cc).
#define CAIRN_BACKEND_PLUGIN(family_expr)                                                                      \
  namespace {                                                                                                  \
  ::cairn::BackendFamily CairnPluginFamily() { return family_expr; }                                           \
  }                                                                                                            \
  extern "C" __attribute__((visibility("default"))) const ::cairn::BackendPluginInfo* cairn_backend_plugin() { \
    static const ::cairn::BackendPluginInfo info = CAIRN_BACKEND_PLUGIN_INFO(&CairnPluginFamily);              \
    return &info;                                                                                              \
  }

#endif  // CAIRN_BACKENDS_PLUGIN_H_
