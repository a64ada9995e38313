// PackedWeights through real backends: a model whose matrices are packed at
// load (BackendOptions::pack_weights, the default) computes the bits of the
// same model read from the file's rows, in one batch and step by step, on
// every quantized golden file.
#include "backends/layers/packed_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/kernels/matmul.h"
#include "backends/register_builtin.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

class PackedWeightsTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::unique_ptr<Backend> Load(bool pack) {
    auto model = ModelFile::Open(testing::TestDataPath(GetParam()));
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    BackendRegistry registry;
    EXPECT_TRUE(RegisterBuiltinBackends(registry).ok());
    BackendOptions options;
    options.pack_weights = pack;
    auto backend = registry.Create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  // How many of the file's matrices have a packed layout on this CPU.
  static int64_t PackableMatrices(const ModelFile& model) {
    int64_t n = 0;
    for (const TensorInfo* t : model.tensors()) {
      if (t->shape.size() == 2 && PackingKernel(t->type, t->shape[0], t->n_rows()) != nullptr) ++n;
    }
    return n;
  }
};

TEST_P(PackedWeightsTest, PackedModelGivesTheBitsOfTheFileRows) {
  CAIRN_REQUIRE_SHARED("golden/tokens.txt");
  auto file = ModelFile::Open(testing::TestDataPath(GetParam()));
  ASSERT_TRUE(file.ok()) << file.status();
  if (PackableMatrices(**file) == 0) GTEST_SKIP() << "no packed layout on this CPU for this file's weight types";
  auto seqs = ReadTokenFile(testing::SharedPath("golden/tokens.txt"));
  ASSERT_TRUE(seqs.ok()) << seqs.status();
  ASSERT_GE(seqs->size(), 3u);
  const std::vector<TokenId>& tokens = (*seqs)[2];  // 64 tokens: prompt panels and decode tiles
  std::unique_ptr<Backend> packed = Load(true), rows = Load(false);
  ASSERT_NE(packed, nullptr);
  ASSERT_NE(rows, nullptr);
  for (int32_t chunk : {0, 1, 5}) {
    auto want = EvalSequence(*rows, tokens, EvalMode{chunk});
    auto got = EvalSequence(*packed, tokens, EvalMode{chunk});
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->values.size(), want->values.size());
    size_t differ = 0;
    for (size_t i = 0; i < want->values.size(); ++i) differ += got->values[i] != want->values[i];
    EXPECT_EQ(differ, 0u) << "chunk " << chunk << ": " << differ << " of " << want->values.size() << " logits differ";
  }
}

// The pages a packed copy replaces are read back from the file when
// touched again: releasing them never changes a tensor (the hazard would be
// a model held in memory, whose bytes madvise would zero: left alone).
TEST(ReleasePagesTest, TensorsReadTheSameAfterTheirPagesAreReleased) {
  CAIRN_REQUIRE_SHARED("golden/models/llama256-Q4_K_M.gguf");
  const std::string path = testing::TestDataPath("golden/models/llama256-Q4_K_M.gguf");
  auto mapped = ModelFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  std::vector<uint8_t> image;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    uint8_t buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) image.insert(image.end(), buf, buf + n);
    std::fclose(f);
  }
  auto in_memory = ModelFile::FromBuffer(image);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  // Memory outside every mapping is left alone too: below the file (the
  // heap) and above it (an anonymous mapping placed past its end, where a
  // careless bounds check wraps around).
  std::vector<uint8_t> below(size_t{1} << 16, 0xAB);
  (*mapped)->ReleasePages(below.data(), below.size());
  EXPECT_TRUE(std::all_of(below.begin(), below.end(), [](uint8_t b) { return b == 0xAB; }));
  const TensorInfo* last = (*mapped)->tensors().back();
  constexpr size_t kAbove = size_t{1} << 20;
  void* hint =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(last->data) + (uintptr_t{1} << 30)) & ~uintptr_t{0xFFFFF});
  void* above = ::mmap(hint, kAbove, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(above, MAP_FAILED);
  ASSERT_GT(reinterpret_cast<uintptr_t>(above), reinterpret_cast<uintptr_t>(last->data));
  std::memset(above, 0xAB, kAbove);
  (*mapped)->ReleasePages(static_cast<const uint8_t*>(above), kAbove);
  const auto* bytes_above = static_cast<const uint8_t*>(above);
  EXPECT_TRUE(std::all_of(bytes_above, bytes_above + kAbove, [](uint8_t b) { return b == 0xAB; }));
  ::munmap(above, kAbove);
  for (const ModelFile* model : {mapped->get(), in_memory->get()}) {
    for (const TensorInfo* t : model->tensors()) {
      const size_t bytes = RowBytes(t->type, t->shape[0]) * static_cast<size_t>(t->n_rows());
      const std::vector<uint8_t> before(t->data, t->data + bytes);
      model->ReleasePages(t->data, bytes);
      ASSERT_TRUE(std::equal(before.begin(), before.end(), t->data)) << t->name;
    }
  }
}

// The quantized golden files (Q4_0, the K-quants, Q8_0) and a hybrid and a
// MoE file whose experts stay rows while their other matrices pack.
INSTANTIATE_TEST_SUITE_P(Files, PackedWeightsTest,
                         ::testing::Values("golden/models/llama256-Q4_0.gguf", "golden/models/llama256-Q4_K_M.gguf",
                                           "golden/models/llama256-Q5_K_M.gguf", "golden/models/llama256-Q6_K.gguf",
                                           "golden/models/llama-q8.gguf", "golden/models/qwen35moe-Q8_0.gguf",
                                           "tests/data/qwen35-Q8_0.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           s = s.substr(s.rfind('/') + 1);
                           s = s.substr(0, s.rfind('.'));
                           for (char& c : s) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace cairn
