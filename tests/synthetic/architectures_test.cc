// Every architecture builder writes a file that the family serving its
// architecture loads (so it has every key and tensor the loader reads, of
// the right shapes) and runs: finite logits, the same for a batch and for
// one token at a time.
#include "synthetic/architectures.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/register_builtin.h"
#include "gtest/gtest.h"

namespace cairn::synthetic {
namespace {

struct Case {
  std::string name;
  SyntheticModel model;
  std::string family;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"llama", Llama(LlamaShape{}), "transformer"});
  LlamaShape qwen2;
  qwen2.arch = "qwen2";
  qwen2.qkv_bias = true;
  cases.push_back({"qwen2", Llama(qwen2), "transformer"});
  LlamaShape qwen3;
  qwen3.arch = "qwen3";
  qwen3.qk_norm = true;
  qwen3.tied_output = true;
  cases.push_back({"qwen3", Llama(qwen3), "transformer"});
  cases.push_back({"gemma3", Gemma(GemmaShape{}), "swa"});
  GemmaShape gemma2;
  gemma2.arch = "gemma2";
  gemma2.qk_norm = false;
  gemma2.rope_base_swa = -1.0f;
  cases.push_back({"gemma2", Gemma(gemma2), "swa"});
  cases.push_back({"mamba", Mamba(MambaShape{}), "recurrent"});
  cases.push_back({"mamba2", Mamba2(Mamba2Shape{}), "recurrent"});
  cases.push_back({"granitehybrid", GraniteHybrid(GraniteHybridShape{}), "hybrid"});
  GraniteHybridShape granite_tied;
  granite_tied.tied_output = true;
  SyntheticModel granite_q8 = GraniteHybrid(granite_tied);
  granite_q8.weight_type = GgmlType::kQ8_0;
  cases.push_back({"granitehybrid-q8_0", granite_q8, "hybrid"});
  cases.push_back({"qwen35", Qwen35(Qwen35Shape{}), "hybrid"});
  Qwen35Shape moe;
  moe.n_expert = 4;
  moe.n_expert_used = 2;
  moe.n_ff_expert = 32;
  moe.n_ff_shared = 32;
  cases.push_back({"qwen35moe", Qwen35(moe), "hybrid"});
  return cases;
}

std::vector<float> Logits(Backend& backend, const std::vector<TokenId>& tokens, bool step) {
  auto memory = backend.NewSequence();
  EXPECT_TRUE(memory.ok()) << memory.status();
  std::vector<float> all;
  for (size_t i = 0; i < tokens.size();) {
    const size_t n = step ? 1 : tokens.size();
    std::vector<int32_t> rows(n);
    for (size_t r = 0; r < n; ++r) rows[r] = static_cast<int32_t>(r);
    SequenceRun run{
        memory->get(), (*memory)->next_pos(), std::span<const TokenId>(tokens).subspan(i, n), nullptr, rows, {}};
    auto out = backend.Forward(std::span<const SequenceRun>(&run, 1));
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    all.insert(all.end(), (*out)[0].values.begin(), (*out)[0].values.end());
    i += n;
  }
  return all;
}

TEST(ArchitecturesTest, EachLoadsInItsFamilyAndRuns) {
  BackendRegistry registry;
  ASSERT_TRUE(RegisterBuiltinBackends(registry).ok());
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto file = c.model.Open(c.name);
    ASSERT_TRUE(file.ok()) << file.status();
    BackendOptions options;
    options.exact_activations = true;
    auto backend = registry.Create(*file, options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->info().family, c.family);
    EXPECT_EQ((*backend)->info().arch, c.model.arch());
    std::vector<TokenId> tokens = {1, 7, 3, 200, 42, 5};
    for (TokenId& t : tokens) t %= (*backend)->info().n_vocab;
    const std::vector<float> batch = Logits(**backend, tokens, false);
    const std::vector<float> step = Logits(**backend, tokens, true);
    ASSERT_EQ(batch.size(), tokens.size() * static_cast<size_t>((*backend)->info().n_vocab));
    ASSERT_EQ(step.size(), batch.size());
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      ASSERT_TRUE(std::isfinite(batch[i])) << i;
      max_diff = std::max(max_diff, static_cast<double>(std::abs(batch[i] - step[i])));
      max_abs = std::max(max_abs, static_cast<double>(std::abs(batch[i])));
    }
    EXPECT_GT(max_abs, 0.0);
    EXPECT_LT(max_diff, 1e-3 * std::max(1.0, max_abs));
  }
}

}  // namespace
}  // namespace cairn::synthetic
