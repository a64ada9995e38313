// KvMemory on its own: capacity, truncation, snapshot encoding and every
// refusal leaving the memory unchanged.
#include "backends/memory/kv_memory.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "backends/memory/fingerprint.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

KvGeometry Geo(Pos capacity = 100, uint64_t layout = 42) {
  KvGeometry g;
  g.layers = UniformKvWidths(3, 8, 4);
  g.capacity = capacity;
  g.layout = layout;
  return g;
}

// Writes a recognizable value into every row of [from, to) and absorbs them.
void Fill(KvMemory& m, Pos from, Pos to, float tag) {
  ASSERT_TRUE(m.Reserve(to).ok());
  for (int32_t l = 0; l < 3; ++l) {
    for (Pos p = from; p < to; ++p) {
      for (int i = 0; i < 8; ++i) m.k(l)[p * 8 + i] = tag + l * 1000 + p + i * 0.01f;
      for (int i = 0; i < 4; ++i) m.v(l)[p * 4 + i] = -(tag + l * 1000 + p + i * 0.01f);
    }
  }
  m.SetNextPos(to);
}

TEST(KvMemoryTest, CapabilitiesFollowTheContent) {
  KvMemory m(Geo(), nullptr);
  EXPECT_EQ(m.next_pos(), 0);
  EXPECT_TRUE(m.caps().truncatable);
  EXPECT_FALSE(m.caps().has_checkpoint_state);
  Fill(m, 0, 10, 1.0f);
  EXPECT_EQ(m.caps().rollback_window, 10);
  EXPECT_EQ(m.Bytes(SnapshotScope::kCheckpoint), 0u);
  EXPECT_GT(m.Bytes(SnapshotScope::kFull), 10u * 3 * (8 + 4) * sizeof(float));
}

TEST(KvMemoryTest, ReserveRespectsCapacityAndKeepsContent) {
  KvMemory m(Geo(/*capacity=*/50), nullptr);
  Fill(m, 0, 5, 2.0f);
  EXPECT_EQ(m.Reserve(51).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(m.Reserve(50).ok());  // grows the storage
  EXPECT_EQ(m.next_pos(), 5);
  EXPECT_EQ(m.k(2)[4 * 8 + 1], 2.0f + 2000 + 4 + 0.01f);
}

TEST(KvMemoryTest, TruncateBounds) {
  KvMemory m(Geo(), nullptr);
  Fill(m, 0, 10, 0.0f);
  EXPECT_EQ(m.Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(11).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.next_pos(), 10);
  ASSERT_TRUE(m.Truncate(3).ok());
  EXPECT_EQ(m.next_pos(), 3);
  ASSERT_TRUE(m.Truncate(0).ok());
  EXPECT_EQ(m.next_pos(), 0);
}

TEST(KvMemoryTest, FullSnapshotRoundTripAndRefusals) {
  KvMemory a(Geo(), nullptr);
  Fill(a, 0, 7, 5.0f);
  auto full = a.Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->pos, 7);
  EXPECT_EQ(full->layout, 42u);
  EXPECT_EQ(full->bytes(), a.Bytes(SnapshotScope::kFull));

  KvMemory b(Geo(), nullptr);
  Fill(b, 0, 20, 9.0f);
  ASSERT_TRUE(b.Restore(*full).ok());
  EXPECT_EQ(b.next_pos(), 7);
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(std::memcmp(a.k(l), b.k(l), 7 * 8 * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(a.v(l), b.v(l), 7 * 4 * sizeof(float)), 0);
  }

  KvMemory c(Geo(), nullptr);
  Fill(c, 0, 4, 1.0f);
  Snapshot bad = *full;
  bad.data.pop_back();
  EXPECT_EQ(c.Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = *full;
  bad.data[0] ^= 0xFF;  // magic
  EXPECT_EQ(c.Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = *full;
  bad.pos = 6;  // disagrees with the header
  EXPECT_EQ(c.Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  KvMemory other_model(Geo(100, /*layout=*/43), nullptr);
  EXPECT_EQ(other_model.Restore(*full).code(), absl::StatusCode::kInvalidArgument);
  KvMemory small(Geo(/*capacity=*/5), nullptr);
  EXPECT_EQ(small.Restore(*full).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.next_pos(), 4);
  EXPECT_EQ(c.k(1)[3 * 8], 1.0f + 1000 + 3);
}

TEST(KvMemoryTest, CheckpointIsEmptyAndCutsBack) {
  KvMemory m(Geo(), nullptr);
  Fill(m, 0, 6, 3.0f);
  auto cp = m.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  EXPECT_TRUE(cp->data.empty());
  EXPECT_EQ(cp->pos, 6);
  Fill(m, 6, 12, 3.0f);
  ASSERT_TRUE(m.Restore(*cp).ok());
  EXPECT_EQ(m.next_pos(), 6);
  ASSERT_TRUE(m.Truncate(2).ok());
  EXPECT_EQ(m.Restore(*cp).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.next_pos(), 2);
  Snapshot with_data = *cp;
  with_data.data.push_back(1);
  EXPECT_EQ(m.Restore(with_data).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvMemoryTest, FingerprintDependsOnContent) {
  const uint64_t h0 = FingerprintMix(0xcbf29ce484222325ULL, int64_t{1});
  EXPECT_NE(h0, FingerprintMix(0xcbf29ce484222325ULL, int64_t{2}));
  EXPECT_EQ(h0, FingerprintMix(0xcbf29ce484222325ULL, int64_t{1}));
}

TEST(KvMemoryTest, LayersOfDifferentWidthsKeepTheirOwnRows) {
  // Attention layers of 2, 1 and 4 K/V heads of 4 floats (keys) and 2 (values).
  KvGeometry g;
  g.layers = {{8, 4}, {4, 2}, {16, 8}};
  g.capacity = 32;
  KvMemory a(g, nullptr);
  ASSERT_TRUE(a.Reserve(5).ok());
  for (int32_t l = 0; l < 3; ++l) {
    const KvRows rows = a.kv(l);
    EXPECT_EQ(rows.k_stride, g.layers[l].k);
    EXPECT_EQ(rows.v_stride, g.layers[l].v);
    for (int64_t i = 0; i < 5 * g.layers[l].k; ++i) rows.k[i] = static_cast<float>(l * 1000 + i);
    for (int64_t i = 0; i < 5 * g.layers[l].v; ++i) rows.v[i] = -static_cast<float>(l * 1000 + i);
  }
  a.SetNextPos(5);
  // A position takes (8 + 4) + (4 + 2) + (16 + 8) floats, not 3 x the widest.
  auto full = a.Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->bytes(), a.Bytes(SnapshotScope::kFull));
  EXPECT_LT(a.Bytes(SnapshotScope::kFull), 100 + 5 * 42 * sizeof(float));
  KvMemory b(g, nullptr);
  ASSERT_TRUE(b.Restore(*full).ok());
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(std::memcmp(a.k(l), b.k(l), 5 * g.layers[l].k * sizeof(float)), 0) << l;
    EXPECT_EQ(std::memcmp(a.v(l), b.v(l), 5 * g.layers[l].v * sizeof(float)), 0) << l;
  }
}

}  // namespace
}  // namespace cairn
