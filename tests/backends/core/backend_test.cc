// ValidateForwardBatch: every check of the Backend::Forward contract that
// the families share, with the status code each violation gets. The
// conformance suite runs the common cases through every real backend; this
// covers the rest (chunks, snapshot rows inside chunks, capacity in
// positions and in stored rows) on a fake memory.
#include <string>
#include <vector>

#include "backends/backend.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

// A memory that only answers next_pos(): ValidateForwardBatch reads nothing
// else.
class FakeMemory final : public SequenceMemory {
 public:
  explicit FakeMemory(Pos next, int64_t rows = -1) : next_(next), rows_(rows < 0 ? next : rows) {}
  MemoryCapabilities caps() const override { return {}; }
  Pos next_pos() const override { return next_; }
  absl::Status Truncate(Pos) override { return absl::UnimplementedError("fake"); }
  absl::StatusOr<Snapshot> Capture(SnapshotScope) const override { return absl::UnimplementedError("fake"); }
  absl::Status Restore(const Snapshot&) override { return absl::UnimplementedError("fake"); }
  size_t Bytes(SnapshotScope) const override { return 0; }
  int64_t rows() const { return rows_; }

 private:
  Pos next_;
  int64_t rows_;
};

class ValidateForwardBatchTest : public ::testing::Test {
 protected:
  absl::Status Check(std::vector<SequenceRun> runs, const ForwardRules& rules, bool count_rows = false) {
    auto owned = [&](const SequenceMemory& m) { return &m == &a_ || &m == &b_; };
    auto rows = [](const SequenceMemory& m) { return static_cast<const FakeMemory&>(m).rows(); };
    if (count_rows) return ValidateForwardBatch(runs, rules, owned, rows);
    return ValidateForwardBatch(runs, rules, owned);
  }

  FakeMemory a_{5};
  FakeMemory b_{0};
  FakeMemory foreign_{0};
  const std::vector<TokenId> tokens_ = {1, 2, 3};
  const ForwardRules text_{10, false, false, 100};
  const ForwardRules all_{10, true, true, 100};
};

TEST_F(ValidateForwardBatchTest, AcceptsValidRuns) {
  const int32_t rows[] = {0, 2};
  EXPECT_TRUE(Check({{&a_, 5, tokens_, nullptr, rows, {}}, {&b_, 0, tokens_, nullptr, {}, {}}}, text_).ok());
  EXPECT_TRUE(Check({{&a_, 5, tokens_, nullptr, rows, rows}}, all_).ok());
  std::vector<float> embd(6);
  EmbeddingChunk chunk{embd.data(), 3, 2};
  EXPECT_TRUE(Check({{&a_, 5, {}, &chunk, rows, {}}}, all_).ok());
}

TEST_F(ValidateForwardBatchTest, NamesTheRunAndTheFault) {
  const TokenId bad[] = {1, 10};
  absl::Status s = Check({{&b_, 0, tokens_, nullptr, {}, {}}, {&a_, 5, bad, nullptr, {}, {}}}, text_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "run 1: token 1 has id 10 outside [0, 10)");
  s = Check({{&a_, 4, tokens_, nullptr, {}, {}}}, text_);
  EXPECT_EQ(s.message(), "run 0: start_pos 4 but the sequence is at 5");
}

TEST_F(ValidateForwardBatchTest, InvalidArgumentCases) {
  std::vector<float> embd(6);
  EmbeddingChunk chunk{embd.data(), 3, 2};
  EmbeddingChunk empty_chunk{embd.data(), 0, 2};
  EmbeddingChunk no_rows{nullptr, 3, 2};
  const int32_t rows[] = {0, 1};
  const int32_t descending[] = {1, 0};
  const int32_t beyond[] = {3};
  const TokenId negative[] = {-1};
  SequenceRun tokens_and_chunk{&a_, 5, tokens_, &chunk, {}, {}};
  SequenceRun snapshot_in_chunk{&a_, 5, {}, &chunk, {}, rows};
  struct Case {
    const char* what;
    std::vector<SequenceRun> runs;
    ForwardRules rules;
  };
  const std::vector<Case> cases = {
      {"no memory", {{nullptr, 0, tokens_, nullptr, {}, {}}}, text_},
      {"foreign memory", {{&foreign_, 0, tokens_, nullptr, {}, {}}}, text_},
      {"memory twice", {{&a_, 5, tokens_, nullptr, {}, {}}, {&a_, 5, tokens_, nullptr, {}, {}}}, text_},
      {"start_pos ahead", {{&a_, 6, tokens_, nullptr, {}, {}}}, text_},
      {"empty run", {{&a_, 5, {}, nullptr, {}, {}}}, text_},
      {"negative id", {{&a_, 5, negative, nullptr, {}, {}}}, text_},
      {"chunk to a text-only family", {{&a_, 5, {}, &chunk, {}, {}}}, text_},
      {"tokens and a chunk", {tokens_and_chunk}, all_},
      {"chunk of zero width", {{&a_, 5, {}, &empty_chunk, {}, {}}}, all_},
      {"chunk without rows", {{&a_, 5, {}, &no_rows, {}, {}}}, all_},
      {"logit rows descending", {{&a_, 5, tokens_, nullptr, descending, {}}}, text_},
      {"logit row beyond the run", {{&a_, 5, tokens_, nullptr, beyond, {}}}, text_},
      {"snapshot rows where unsupported", {{&a_, 5, tokens_, nullptr, {}, rows}}, text_},
      {"snapshot row beyond the run", {{&a_, 5, tokens_, nullptr, {}, beyond}}, all_},
      {"snapshot rows inside a chunk", {snapshot_in_chunk}, all_},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Check(c.runs, c.rules).code(), absl::StatusCode::kInvalidArgument) << c.what;
  }
}

TEST_F(ValidateForwardBatchTest, CapacityCountsPositionsAndStoredRows) {
  const ForwardRules small{10, true, false, 8};
  // 5 + 3 positions fit a capacity of 8; one more does not.
  EXPECT_TRUE(Check({{&a_, 5, tokens_, nullptr, {}, {}}}, small).ok());
  const std::vector<TokenId> four = {1, 2, 3, 4};
  absl::Status s = Check({{&a_, 5, four, nullptr, {}, {}}}, small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // A 3 x 2 chunk advances 3 positions but stores 6 rows: positions fit,
  // rows only when the family does not count them.
  std::vector<float> embd(6);
  EmbeddingChunk chunk{embd.data(), 3, 2};
  EXPECT_TRUE(Check({{&a_, 5, {}, &chunk, {}, {}}}, small).ok());
  s = Check({{&a_, 5, {}, &chunk, {}, {}}}, small, /*count_rows=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // Capacity 0: no limit.
  EXPECT_TRUE(Check({{&a_, 5, four, nullptr, {}, {}}}, ForwardRules{10, false, false, 0}).ok());
}

}  // namespace
}  // namespace cairn
