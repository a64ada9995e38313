// Malformed plugins for plugin_test.cc, built as shared libraries: one with
// no entry point (CAIRN_FAKE_PLUGIN_ABI undefined), one whose entry point
// reports another ABI version.
#include "backends/plugin.h"

#ifdef CAIRN_FAKE_PLUGIN_ABI
extern "C" __attribute__((visibility("default"))) const cairn::BackendPluginInfo* cairn_backend_plugin() {
  static const cairn::BackendPluginInfo info{CAIRN_FAKE_PLUGIN_ABI, __VERSION__, "fake", nullptr};
  return &info;
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_cairn_plugin() { return 0; }
#endif
