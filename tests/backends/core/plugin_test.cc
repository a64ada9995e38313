// LoadBackendPlugin against real shared libraries: the recurrent family's
// plugin (which this test does not link), malformed ones, and plugins built
// against another ABI, abseil, compiler or layout of the boundary types
// (fake_plugin.cc). Every refusal leaves the registry as it was.
#include "backends/plugin.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/model/gguf.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

using ::cairn::testing::SharedPath;

void ExpectRefused(const std::string& path, absl::StatusCode code, const std::string& words) {
  BackendRegistry registry;
  const absl::Status s = LoadBackendPlugin(path, registry);
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_NE(s.message().find(words), std::string::npos) << s;
  EXPECT_TRUE(registry.Families().empty());
}

TEST(PluginTest, MissingFileIsNotFound) {
  ExpectRefused("/nonexistent/libcairn_x_plugin.so", absl::StatusCode::kNotFound, "no such file");
}

TEST(PluginTest, AFileThatIsNotALibraryIsRefused) {
  const std::string path = std::filesystem::temp_directory_path() / "cairn_plugin_test_not_a_library.so";
  std::ofstream(path) << "not a shared library\n";
  ExpectRefused(path, absl::StatusCode::kInvalidArgument, "not a loadable shared library");
  std::filesystem::remove(path);
}

TEST(PluginTest, ALibraryWithoutTheEntryPointIsRefused) {
  ExpectRefused(CAIRN_NO_ENTRY_PLUGIN, absl::StatusCode::kInvalidArgument, "no entry point 'cairn_backend_plugin'");
}

TEST(PluginTest, AnotherAbiVersionIsRefused) {
  ExpectRefused(CAIRN_WRONG_ABI_PLUGIN, absl::StatusCode::kFailedPrecondition,
                absl::StrCat("plugin ABI version 999, this server takes version ", kBackendPluginAbiVersion));
}

// Built with libstdc++'s other std::string ABI: every type holding a string
// is laid out otherwise, which the sizes the plugin reports show before any
// of its code runs.
TEST(PluginTest, OtherTypeLayoutsAreRefusedNamingTheTypes) {
  ExpectRefused(CAIRN_OLD_STRING_ABI_PLUGIN, absl::StatusCode::kFailedPrecondition,
                "built with other type layouts than this server");
  BackendRegistry registry;
  const std::string message(LoadBackendPlugin(CAIRN_OLD_STRING_ABI_PLUGIN, registry).message());
  EXPECT_NE(message.find(absl::StrCat("std::string 8 bytes (here ", sizeof(std::string), ")")), std::string::npos)
      << message;
  for (const char* type : {"BackendFamily", "ModelInfo", "BackendOptions", "TensorInfo"}) {
    EXPECT_NE(message.find(absl::StrCat(type, " ")), std::string::npos) << type << ": " << message;
  }
  // Types without a string are not named.
  EXPECT_EQ(message.find("absl::Status "), std::string::npos) << message;
  EXPECT_EQ(message.find("SequenceRun "), std::string::npos) << message;
}

TEST(PluginTest, AnotherAbseilReleaseIsRefused) {
  ExpectRefused(CAIRN_OTHER_ABSEIL_PLUGIN, absl::StatusCode::kFailedPrecondition,
                absl::StrCat("built against abseil LTS 20230125, this server against ", kAbseilLtsVersion));
}

TEST(PluginTest, AnotherCompilerIsRefused) {
  ExpectRefused(CAIRN_OTHER_TOOLCHAIN_PLUGIN, absl::StatusCode::kFailedPrecondition,
                "built with compiler 'gcc 0.0', this server with '" __VERSION__ "'");
}

// This build's abseil is an LTS release: the check compares real versions.
TEST(PluginTest, AbseilVersionIsThisBuilds) { EXPECT_EQ(kAbseilLtsVersion, uint32_t{ABSL_LTS_RELEASE_VERSION}); }

TEST(PluginTest, RegistersItsFamilyOnceOnly) {
  BackendRegistry registry;
  ASSERT_TRUE(LoadBackendPlugin(CAIRN_RECURRENT_PLUGIN, registry).ok());
  EXPECT_EQ(registry.Families(), std::vector<std::string>{"recurrent"});
  EXPECT_EQ(*registry.FamilyForArch("mamba2"), "recurrent");
  EXPECT_EQ(*registry.FamilyForArch("mamba"), "recurrent");
  // The same family a second time: refused, the registry unchanged.
  const absl::Status again = LoadBackendPlugin(CAIRN_RECURRENT_PLUGIN, registry);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("'recurrent' is already registered"), std::string::npos) << again;
  EXPECT_EQ(registry.Families(), std::vector<std::string>{"recurrent"});
}

// The plugin's backend computes what the reference computes.
TEST(PluginTest, ItsBackendMatchesTheGoldenLogits) {
  CAIRN_REQUIRE_SHARED("golden/logits/mamba2.bin");
  BackendRegistry registry;
  ASSERT_TRUE(LoadBackendPlugin(CAIRN_RECURRENT_PLUGIN, registry).ok());
  auto model = ModelFile::Open(SharedPath("golden/models/mamba2.gguf"));
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions options;
  options.n_threads = 2;
  auto backend = registry.Create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->info().family, "recurrent");
  auto tokens = ReadTokenFile(SharedPath("golden/tokens.txt"));
  auto ref = ReadLogitsFile(SharedPath("golden/logits/mamba2.bin"));
  ASSERT_TRUE(tokens.ok() && ref.ok());
  auto got = EvalSequences(**backend, *tokens, EvalMode{});
  ASSERT_TRUE(got.ok()) << got.status();
  auto cmp = CompareAll(*got, *ref);
  ASSERT_TRUE(cmp.ok()) << cmp.status();
  EXPECT_LT(cmp->max_rel, 1e-4);
  EXPECT_EQ(cmp->argmax_agree, cmp->rows);
}

}  // namespace
}  // namespace cairn
