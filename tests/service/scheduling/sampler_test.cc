#include "service/scheduling/sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cairn::service {
namespace {

TEST(SamplerTest, GreedyPicksTheLargestLogit) {
  SamplingConfig c;
  c.temperature = 0;
  Sampler s(c);
  auto t = s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->id, 1);
}

// Greedy without penalties reads the row itself (no copy): ties still go
// to the lowest id, the row is left unchanged, and logprobs still come.
TEST(SamplerTest, PlainGreedyTakesTheFirstOfTiedLogitsAndKeepsTheRow) {
  SamplingConfig c;
  c.temperature = 0;
  c.logprobs = true;
  Sampler s(c);
  const std::vector<float> row{0.5f, 2.0f, 2.0f, -1.0f};
  auto t = s.Sample(row);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->id, 1);
  EXPECT_EQ(row, (std::vector<float>{0.5f, 2.0f, 2.0f, -1.0f}));
  EXPECT_LT(t->logprob, 0.0f);
  EXPECT_NEAR(std::exp(t->logprob), std::exp(2.0) / (std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0)), 1e-5);
}

// Greedy's argmax runs in lanes: on rows of every length around the lane
// count, with ties, infinities and signed zeros anywhere (first included),
// it picks what std::max_element picks.
TEST(SamplerTest, GreedyPicksAsMaxElementOnAnyRow) {
  SamplingConfig c;
  c.temperature = 0;
  Sampler s(c);
  std::mt19937 rng(7);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f,
                            -0.0f, 3.0f};
  int checked = 0;
  for (size_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 32000}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> row(n);
      // Few distinct values, so ties are common.
      for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % 7) - 3);
      for (int k = trial % 4; k > 0; --k) row[rng() % n] = specials[rng() % std::size(specials)];
      auto t = s.Sample(row);
      ASSERT_TRUE(t.ok());
      ASSERT_EQ(t->id, std::max_element(row.begin(), row.end()) - row.begin()) << "n " << n << " trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 400);
}

// A NaN anywhere in the row (a corrupt weight, an overflow) is an error
// that names the first, whatever the sampling: never a token picked from
// noise. Infinities are values like any other.
TEST(SamplerTest, ARowWithANaNIsAnInternalError) {
  for (float temperature : {0.0f, 1.0f}) {
    SamplingConfig c;
    c.temperature = temperature;
    c.logprobs = true;
    Sampler s(c);
    for (size_t at : {size_t{0}, size_t{17}, size_t{31999}}) {
      std::vector<float> row(32000, 0.5f);
      row[at] = std::numeric_limits<float>::quiet_NaN();
      row[at / 2 + 1] = std::numeric_limits<float>::quiet_NaN();  // a later one, or the same
      auto t = s.Sample(row);
      ASSERT_FALSE(t.ok()) << at;
      EXPECT_EQ(t.status().code(), absl::StatusCode::kInternal);
      EXPECT_NE(t.status().message().find("token id " + std::to_string(std::min(at, at / 2 + 1))), std::string::npos)
          << t.status();
    }
    std::vector<float> tail(100, 0.5f);  // past the last 16 values
    tail[98] = -std::numeric_limits<float>::quiet_NaN();
    auto t = s.Sample(tail);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("token id 98"), std::string::npos) << t.status();
    std::vector<float> row(100, 0.5f);
    row[3] = std::numeric_limits<float>::infinity();
    row[4] = -std::numeric_limits<float>::infinity();
    if (temperature == 0.0f) {
      t = s.Sample(row);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(t->id, 3);
    }
  }
}

TEST(SamplerTest, SameSeedSameSequence) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.seed = 42;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 1.3f);
  Sampler a(c), b(c);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.Sample(logits)->id, b.Sample(logits)->id);
}

TEST(SamplerTest, TopKRestrictsTheChoice) {
  SamplingConfig c;
  c.temperature = 5.0f;
  c.top_k = 2;
  c.seed = 1;
  Sampler s(c);
  const std::vector<float> logits = {1.0f, 5.0f, 4.9f, 0.0f, 4.8f};
  for (int i = 0; i < 200; ++i) {
    const int id = s.Sample(logits)->id;
    EXPECT_TRUE(id == 1 || id == 2) << id;
  }
}

TEST(SamplerTest, MinPAndTopPDropUnlikelyTokens) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.min_p = 0.5f;
  c.seed = 3;
  Sampler s(c);
  // p(0) ~ 0.49, p(1) ~ 0.49, p(2) tiny: min_p drops 2.
  const std::vector<float> logits = {3.0f, 3.0f, -2.0f};
  std::map<int, int> n;
  for (int i = 0; i < 300; ++i) ++n[s.Sample(logits)->id];
  EXPECT_EQ(n[2], 0);
  EXPECT_GT(n[0], 50);
  EXPECT_GT(n[1], 50);
  SamplingConfig p;
  p.temperature = 1.0f;
  p.top_p = 0.4f;
  Sampler sp(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sp.Sample(std::vector<float>{0.0f, 1.0f, 0.5f})->id, 1);
}

TEST(SamplerTest, PenaltiesApplyToTheWindow) {
  SamplingConfig c;
  c.temperature = 0;
  c.repetition_penalty = 4.0f;
  c.penalty_last_n = 2;
  Sampler s(c);
  s.AddHistory(std::vector<TokenId>{1});
  // 2.0 / 4 = 0.5 < 1.0: token 0 wins.
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 2.0f})->id, 0);
  SamplingConfig q;
  q.temperature = 0;
  q.presence_penalty = 1.5f;
  Sampler t(q);
  t.AddHistory(std::vector<TokenId>{1, 1, 1});
  EXPECT_EQ(t.Sample(std::vector<float>{1.0f, 2.0f})->id, 0);
  SamplingConfig off;
  off.temperature = 0;
  off.presence_penalty = 1.5f;
  off.penalty_last_n = 0;
  Sampler u(off);
  u.AddHistory(std::vector<TokenId>{1});
  EXPECT_EQ(u.Sample(std::vector<float>{1.0f, 2.0f})->id, 1);
}

TEST(SamplerTest, LogprobsAreNormalized) {
  SamplingConfig c;
  c.temperature = 0;
  c.logprobs = true;
  c.top_logprobs = 3;
  Sampler s(c);
  auto t = s.Sample(std::vector<float>{0.0f, 1.0f, 2.0f});
  ASSERT_TRUE(t.ok());
  double sum = 0;
  for (const auto& [id, lp] : t->top) sum += std::exp(lp);
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(t->top[0].first, 2);
  EXPECT_FLOAT_EQ(t->logprob, t->top[0].second);
}

TEST(SamplerTest, ValidateRejectsOutOfRange) {
  SamplingConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.temperature = -0.1f;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c = SamplingConfig();
  c.top_p = 1.5f;
  EXPECT_FALSE(c.Validate().ok());
  c = SamplingConfig();
  c.penalty_last_n = -2;
  EXPECT_FALSE(c.Validate().ok());
  SamplingConfig d;
  Sampler s(d);
  EXPECT_EQ(s.Sample(std::vector<float>{}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::service
