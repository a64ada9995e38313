// HybridMemory on its own: the composition rules (truncate only to 0 or
// next_pos, checkpoint = recurrent part, full = both parts), position/row
// accounting of chunks, and exact, all-or-nothing restores.
#include "backends/memory/hybrid_memory.h"

#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace cairn {
namespace {

HybridGeometry Geometry() {
  HybridGeometry g;
  g.attention.layers = {{4, 4}, {8, 8}};  // attention layers of different K/V head counts
  g.attention.capacity = 64;
  g.attention.layout = 0x1111;
  g.recurrent_layers = 3;
  g.conv_floats = 6;
  g.state_floats = 10;
  g.layout = 0x2222;
  return g;
}

// What a backend's Forward does to the memory for a run of `n_rows` rows over
// `span` positions: writes K/V rows and changes the recurrent states.
void Absorb(HybridMemory& m, Pos span, int64_t n_rows, bool chunk, float seed) {
  ASSERT_TRUE(m.attention().Reserve(static_cast<Pos>(m.stored_rows() + n_rows)).ok());
  for (int64_t r = m.stored_rows(); r < m.stored_rows() + n_rows; ++r) {
    for (int32_t l = 0; l < 2; ++l) {
      const int64_t w = m.geometry().attention.layers[l].k;  // K and V of one width here
      for (int64_t d = 0; d < w; ++d) {
        m.attention().k(l)[r * w + d] = seed + static_cast<float>(r * 10 + l + d);
        m.attention().v(l)[r * w + d] = -seed - static_cast<float>(r * 10 + l + d);
      }
    }
  }
  for (int64_t l = 0; l < 3; ++l) {
    for (int i = 0; i < 6; ++i) m.recurrent_part().conv_state(l)[i] += seed * static_cast<float>(i + l);
    for (int i = 0; i < 10; ++i) m.recurrent_part().ssm_state(l)[i] = m.recurrent_part().ssm_state(l)[i] * 0.5f + seed;
  }
  m.Commit(span, n_rows, chunk);
}

std::unique_ptr<HybridMemory> New() {
  auto m = HybridMemory::Create(Geometry(), nullptr);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<float> State(HybridMemory& m) {
  const float* p = m.recurrent_part().conv_state(0);
  return std::vector<float>(p, p + 3 * 16);
}

std::vector<float> Rows(HybridMemory& m) {
  std::vector<float> out;
  for (int32_t l = 0; l < 2; ++l) {
    const int64_t w = m.geometry().attention.layers[l].k;
    out.insert(out.end(), m.attention().k(l), m.attention().k(l) + m.stored_rows() * w);
    out.insert(out.end(), m.attention().v(l), m.attention().v(l) + m.stored_rows() * w);
  }
  return out;
}

TEST(HybridMemoryTest, CapabilitiesAndTruncateRules) {
  auto m = New();
  const MemoryCapabilities c = m->caps();
  EXPECT_FALSE(c.truncatable);
  EXPECT_EQ(c.rollback_window, 0);
  EXPECT_TRUE(c.has_checkpoint_state);
  Absorb(*m, 5, 5, false, 1.0f);
  EXPECT_EQ(m->Truncate(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->Truncate(6).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->next_pos(), 5);
  EXPECT_EQ(m->stored_rows(), 5);
  EXPECT_TRUE(m->Truncate(5).ok());
  EXPECT_EQ(m->next_pos(), 5);
  ASSERT_TRUE(m->Truncate(0).ok());
  EXPECT_EQ(m->next_pos(), 0);
  EXPECT_EQ(m->stored_rows(), 0);
  EXPECT_EQ(m->recurrent_part().next_pos(), 0);
  for (float v : State(*m)) ASSERT_EQ(v, 0.0f) << "Truncate(0) must reset the recurrent state";
  EXPECT_TRUE(m->chunks().empty());
}

TEST(HybridMemoryTest, ChunksMapPositionsToRows) {
  auto m = New();
  Absorb(*m, 3, 3, false, 1.0f);  // positions [0,3), rows [0,3)
  Absorb(*m, 4, 12, true, 2.0f);  // positions [3,7), rows [3,15)
  Absorb(*m, 2, 2, false, 3.0f);  // positions [7,9), rows [15,17)
  EXPECT_EQ(m->next_pos(), 9);
  EXPECT_EQ(m->stored_rows(), 17);
  ASSERT_EQ(m->chunks().size(), 1u);
  EXPECT_EQ(m->chunks()[0].pos, 3);
  EXPECT_EQ(m->chunks()[0].span, 4);
  EXPECT_EQ(m->chunks()[0].row, 3);
  EXPECT_EQ(m->chunks()[0].n_rows, 12);
  for (Pos p : {4, 5, 6}) {
    absl::Status s = m->Truncate(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("inside the embedding chunk"), std::string::npos) << s;
  }
  EXPECT_EQ(m->next_pos(), 9);
}

TEST(HybridMemoryTest, CheckpointHoldsOnlyTheRecurrentPartAndRestoresExactly) {
  auto m = New();
  Absorb(*m, 3, 3, false, 1.0f);
  Absorb(*m, 4, 12, true, 2.0f);
  auto cp = m->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->pos, 7);
  EXPECT_EQ(cp->bytes(), m->Bytes(SnapshotScope::kCheckpoint));
  // Recurrent state (3 layers x 16 floats) plus a header and one chunk record.
  EXPECT_GE(cp->bytes(), 3u * 16 * 4);
  EXPECT_LT(cp->bytes(), 3u * 16 * 4 + 128);
  const std::vector<float> state7 = State(*m);
  const std::vector<float> rows7 = Rows(*m);

  Absorb(*m, 5, 5, false, 3.0f);
  Absorb(*m, 2, 4, true, 4.0f);
  ASSERT_TRUE(m->Restore(*cp).ok());
  EXPECT_EQ(m->next_pos(), 7);
  EXPECT_EQ(m->stored_rows(), 15);
  EXPECT_EQ(m->recurrent_part().next_pos(), 7);
  EXPECT_EQ(m->chunks().size(), 1u);
  EXPECT_EQ(State(*m), state7);
  EXPECT_EQ(Rows(*m), rows7);
}

TEST(HybridMemoryTest, CheckpointBeyondTheCachedPrefixIsRefused) {
  auto m = New();
  Absorb(*m, 6, 6, false, 1.0f);
  auto cp = m->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  ASSERT_TRUE(m->Truncate(0).ok());
  Absorb(*m, 4, 4, false, 1.0f);
  const std::vector<float> state = State(*m);
  EXPECT_EQ(m->Restore(*cp).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->next_pos(), 4);
  EXPECT_EQ(State(*m), state);
}

TEST(HybridMemoryTest, FullSnapshotMovesEverythingToAnotherMemory) {
  auto a = New();
  Absorb(*a, 3, 3, false, 1.0f);
  Absorb(*a, 4, 12, true, 2.0f);
  Absorb(*a, 1, 1, false, 3.0f);
  auto full = a->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->bytes(), a->Bytes(SnapshotScope::kFull));
  EXPECT_GT(full->bytes(), a->Bytes(SnapshotScope::kCheckpoint) + 16u * 2 * 2 * 4 * 4);
  auto b = New();
  Absorb(*b, 2, 2, false, 9.0f);
  ASSERT_TRUE(b->Restore(*full).ok());
  EXPECT_EQ(b->next_pos(), 8);
  EXPECT_EQ(b->stored_rows(), 16);
  EXPECT_EQ(State(*b), State(*a));
  EXPECT_EQ(Rows(*b), Rows(*a));
  ASSERT_EQ(b->chunks().size(), 1u);
  EXPECT_EQ(b->Truncate(5).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HybridMemoryTest, MalformedOrForeignSnapshotsChangeNothing) {
  auto m = New();
  Absorb(*m, 3, 3, false, 1.0f);
  Absorb(*m, 4, 12, true, 2.0f);
  auto full = m->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  Absorb(*m, 2, 2, false, 3.0f);
  const std::vector<float> state = State(*m);
  const std::vector<float> rows = Rows(*m);

  std::vector<Snapshot> bad;
  Snapshot s = *full;
  s.layout ^= 1;
  bad.push_back(s);
  s = *full;
  s.data.resize(s.data.size() - 4);
  bad.push_back(s);
  s = *full;
  s.data.resize(10);
  bad.push_back(s);
  s = *full;
  s.pos += 1;
  bad.push_back(s);
  s = *full;
  s.data[0] ^= 0xff;  // magic
  bad.push_back(s);
  s = *full;
  // The chunk record's row count, so rows and positions disagree.
  int64_t rows_field;
  std::memcpy(&rows_field, s.data.data() + 48 + 24, 8);
  rows_field += 1;
  std::memcpy(s.data.data() + 48 + 24, &rows_field, 8);
  bad.push_back(s);
  s = *full;
  s.scope = SnapshotScope::kCheckpoint;
  bad.push_back(s);
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(m->Restore(bad[i]).code(), absl::StatusCode::kInvalidArgument) << "case " << i;
    EXPECT_EQ(m->next_pos(), 9) << "case " << i;
    EXPECT_EQ(State(*m), state) << "case " << i;
    EXPECT_EQ(Rows(*m), rows) << "case " << i;
  }
}

TEST(HybridMemoryTest, NeedsARecurrentLayer) {
  HybridGeometry g = Geometry();
  g.recurrent_layers = 0;
  EXPECT_EQ(HybridMemory::Create(g, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  // A recurrent layer of no state at all is no recurrent layer either.
  g = Geometry();
  g.conv_floats = 0;
  g.state_floats = 0;
  EXPECT_EQ(HybridMemory::Create(g, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// LFM2's short convolutions carry conv inputs and no recurrent state: such
// layers are recurrent slots all the same, captured and restored exactly.
TEST(HybridMemoryTest, RecurrentLayersMayHoldAConvStateOnly) {
  HybridGeometry g = Geometry();
  g.state_floats = 0;
  auto m = HybridMemory::Create(g, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  HybridMemory& mem = **m;
  ASSERT_TRUE(mem.attention().Reserve(4).ok());
  for (int32_t l = 0; l < 3; ++l) {
    const RecurrentState r = mem.recurrent(l);
    EXPECT_EQ(r.state, r.conv + 6) << "an empty state just past the conv inputs";
    for (int i = 0; i < 6; ++i) r.conv[i] = static_cast<float>(l * 10 + i);
  }
  mem.Commit(4, 4, false);
  auto snap = mem.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(mem.recurrent_part().Bytes(SnapshotScope::kCheckpoint), 3 * 6 * sizeof(float));
  mem.recurrent(1).conv[2] = -1.0f;
  ASSERT_TRUE(mem.Restore(*snap).ok());
  EXPECT_EQ(mem.recurrent(1).conv[2], 12.0f);
  EXPECT_EQ(mem.next_pos(), 4);
}

}  // namespace
}  // namespace cairn
