// Plugins that a server must refuse, for plugin_test.cc, each built as a
// shared library with one definition saying what is wrong with it:
//   CAIRN_FAKE_NO_ENTRY        no entry point at all
//   CAIRN_FAKE_ABI_VERSION=N   the entry point reports ABI version N
//   CAIRN_FAKE_ABSEIL_LTS=N    it declares another abseil LTS release
//   CAIRN_FAKE_TOOLCHAIN="x"   it declares another compiler
//   CAIRN_FAKE_OLD_STRING_ABI  nothing declared wrong: the plugin macro
//                              itself, built with -D_GLIBCXX_USE_CXX11_ABI=0,
//                              so that std::string and every type holding one
//                              really are laid out otherwise
#include "backends/plugin.h"

#if defined(CAIRN_FAKE_NO_ENTRY)
extern "C" __attribute__((visibility("default"))) int not_a_cairn_plugin() { return 0; }
#else
namespace {

// A family that is never registered: every plugin here is refused first.
cairn::BackendFamily FakeFamily() { return cairn::BackendFamily{"fake", {"fake"}, nullptr}; }

}  // namespace
#endif

#if defined(CAIRN_FAKE_NO_ENTRY)
#elif defined(CAIRN_FAKE_OLD_STRING_ABI)
CAIRN_BACKEND_PLUGIN(FakeFamily())
#else
extern "C" __attribute__((visibility("default"))) const cairn::BackendPluginInfo* cairn_backend_plugin() {
  static const cairn::BackendPluginInfo info = [] {
    cairn::BackendPluginInfo i = CAIRN_BACKEND_PLUGIN_INFO(&FakeFamily);
#if defined(CAIRN_FAKE_ABI_VERSION)
    i.abi_version = CAIRN_FAKE_ABI_VERSION;
#elif defined(CAIRN_FAKE_ABSEIL_LTS)
    i.abseil_lts_version = CAIRN_FAKE_ABSEIL_LTS;
#elif defined(CAIRN_FAKE_TOOLCHAIN)
    i.toolchain = CAIRN_FAKE_TOOLCHAIN;
#endif
    return i;
  }();
  return &info;
}
#endif
