// SwaMemory without a model: rows are written as the backend would (Reserve,
// ring/global rows, Advance) with values that encode (layer, position, lane),
// so every test can check exactly which rows a memory holds.
#include "backends/memory/swa_memory.h"

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

constexpr int32_t kWindow = 5;
constexpr Pos kSlack = 6;
constexpr Pos kRing = kWindow - 1 + kSlack;  // 10

SwaGeometry Geometry() {
  SwaGeometry g;
  // Layers of different widths (files declare K/V heads per layer).
  g.global = {{4, 3}, {6, 5}};
  g.local = {{4, 3}, {5, 2}, {8, 1}};
  g.window = kWindow;
  g.ring_rows = kRing;
  g.capacity = 1000;
  g.layout = 0x1234;
  return g;
}

float Value(int32_t layer, Pos p, int64_t lane, bool v, int32_t salt) {
  return static_cast<float>(salt * 1000000 + layer * 100000 + p * 10 + lane) + (v ? 0.5f : 0.0f);
}

// Absorbs [next_pos, end) in one step, as Forward would.
void Feed(SwaMemory& m, Pos end, int32_t salt = 0) {
  ASSERT_TRUE(m.Reserve(end).ok());
  const SwaGeometry& g = m.geometry();
  const Pos p0 = m.next_pos();
  for (Pos p = p0; p < end; ++p) {
    for (int32_t l = 0; l < g.n_global(); ++l) {
      const KvWidth w = g.global[l];
      for (int64_t d = 0; d < w.k; ++d) m.global_k(l)[p * w.k + d] = Value(l, p, d, false, salt);
      for (int64_t d = 0; d < w.v; ++d) m.global_v(l)[p * w.v + d] = Value(l, p, d, true, salt);
    }
    if (p < end - g.ring_rows) continue;  // would be overwritten within this step
    for (int32_t l = 0; l < g.n_local(); ++l) {
      for (int64_t d = 0; d < g.local[l].k; ++d) m.ring_k(l, p)[d] = Value(10 + l, p, d, false, salt);
      for (int64_t d = 0; d < g.local[l].v; ++d) m.ring_v(l, p)[d] = Value(10 + l, p, d, true, salt);
    }
  }
  m.Advance(end);
}

// Every row the memory claims to hold carries the expected value.
void ExpectHolds(const SwaMemory& m, int32_t salt = 0) {
  const SwaGeometry& g = m.geometry();
  auto& mm = const_cast<SwaMemory&>(m);
  for (Pos p = 0; p < m.next_pos(); ++p) {
    for (int32_t l = 0; l < g.n_global(); ++l) {
      const KvWidth w = g.global[l];
      ASSERT_EQ(mm.global_k(l)[p * w.k + 1], Value(l, p, 1, false, salt)) << "global " << l << " pos " << p;
      ASSERT_EQ(mm.global_v(l)[p * w.v + 2], Value(l, p, 2, true, salt)) << "global " << l << " pos " << p;
    }
  }
  for (Pos p = m.oldest(); p < m.next_pos(); ++p) {
    for (int32_t l = 0; l < g.n_local(); ++l) {
      ASSERT_EQ(m.ring_k(l, p)[3], Value(10 + l, p, 3, false, salt)) << "ring " << l << " pos " << p;
      ASSERT_EQ(m.ring_v(l, p)[0], Value(10 + l, p, 0, true, salt)) << "ring " << l << " pos " << p;
    }
  }
}

TEST(SwaMemoryTest, FreshMemoryHasCheckpointStateAndNothingToRollBack) {
  SwaMemory m(Geometry(), nullptr);
  const MemoryCapabilities c = m.caps();
  EXPECT_FALSE(c.truncatable);
  EXPECT_TRUE(c.has_checkpoint_state);
  EXPECT_EQ(c.rollback_window, 0);
  EXPECT_EQ(m.next_pos(), 0);
  EXPECT_TRUE(m.Truncate(0).ok());
}

TEST(SwaMemoryTest, RollbackWindowIsEverythingUntilTheRingWrapsThenTheSlack) {
  SwaMemory m(Geometry(), nullptr);
  for (Pos n : {1, 4, 9, 10}) {
    Feed(m, n);
    EXPECT_EQ(m.oldest(), 0);
    EXPECT_EQ(m.caps().rollback_window, n) << "at " << n;
  }
  Feed(m, 11);  // position 0 leaves the ring
  EXPECT_EQ(m.oldest(), 1);
  // A query at p needs p - 4 .. p - 1: the lowest reachable p is 1 + 4 = 5.
  EXPECT_EQ(m.caps().rollback_window, 11 - 5);
  Feed(m, 57);  // one long step
  EXPECT_EQ(m.oldest(), 57 - kRing);
  EXPECT_EQ(m.caps().rollback_window, kSlack);
  ExpectHolds(m);
}

TEST(SwaMemoryTest, TruncateJustInsideTheWindowSucceedsJustOutsideFailsAndChangesNothing) {
  SwaMemory m(Geometry(), nullptr);
  Feed(m, 40);
  const Pos window = m.caps().rollback_window;
  ASSERT_EQ(window, kSlack);
  const size_t bytes = m.Bytes(SnapshotScope::kFull);

  absl::Status outside = m.Truncate(40 - window - 1);
  EXPECT_EQ(outside.code(), absl::StatusCode::kFailedPrecondition) << outside;
  EXPECT_EQ(m.next_pos(), 40);
  EXPECT_EQ(m.caps().rollback_window, window);
  EXPECT_EQ(m.Bytes(SnapshotScope::kFull), bytes);
  ExpectHolds(m);

  // Cutting back shrinks what is left to give back, by exactly the cut.
  ASSERT_TRUE(m.Truncate(38).ok());
  EXPECT_EQ(m.caps().rollback_window, window - 2);
  ASSERT_TRUE(m.Truncate(40 - window).ok());  // the lowest position reachable
  EXPECT_EQ(m.next_pos(), 40 - window);
  EXPECT_EQ(m.caps().rollback_window, 0);
  EXPECT_EQ(m.Truncate(40 - window - 1).code(), absl::StatusCode::kFailedPrecondition);
  ExpectHolds(m);
  // New rows bring the window back.
  Feed(m, 40 - window + 3);
  EXPECT_EQ(m.caps().rollback_window, 3);
  ExpectHolds(m);
  // Truncate(0) always resets.
  ASSERT_TRUE(m.Truncate(0).ok());
  EXPECT_EQ(m.next_pos(), 0);
  EXPECT_EQ(m.oldest(), 0);
}

TEST(SwaMemoryTest, TruncateRejectsPositionsOutsideTheSequence) {
  SwaMemory m(Geometry(), nullptr);
  Feed(m, 7);
  EXPECT_EQ(m.Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m.Truncate(7).ok());
  EXPECT_EQ(m.next_pos(), 7);
}

TEST(SwaMemoryTest, CheckpointHoldsOnlyTheRingsAndDoesNotGrowWithTheContext) {
  SwaMemory m(Geometry(), nullptr);
  const SwaGeometry g = Geometry();
  // Bytes per position over the local and the global layers, each of its widths.
  const size_t local_row = static_cast<size_t>(KvRowFloats(g.local)) * sizeof(float);
  const size_t global_row = static_cast<size_t>(KvRowFloats(g.global)) * sizeof(float);
  Feed(m, 6);
  const size_t header = m.Bytes(SnapshotScope::kCheckpoint) - 6 * local_row;
  Feed(m, 30);
  const size_t at30 = m.Bytes(SnapshotScope::kCheckpoint);
  Feed(m, 900);
  const size_t at900 = m.Bytes(SnapshotScope::kCheckpoint);
  EXPECT_EQ(at30, at900);
  EXPECT_EQ(at900, header + static_cast<size_t>(kRing) * local_row);  // rings only
  EXPECT_EQ(m.Bytes(SnapshotScope::kFull), at900 + 900 * global_row);
  auto cp = m.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(cp->bytes(), at900);
  EXPECT_EQ(cp->pos, 900);
  EXPECT_EQ(cp->layout, g.layout);
}

TEST(SwaMemoryTest, CheckpointRestoreIsExactAndCutsTheGlobalLayersBack) {
  SwaMemory m(Geometry(), nullptr);
  Feed(m, 23);
  auto cp = m.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  const MemoryCapabilities caps = m.caps();
  const Pos oldest = m.oldest();
  // Go on, cut back beyond the ring's reach by diverging with other rows.
  Feed(m, 31, /*salt=*/0);
  EXPECT_EQ(m.Truncate(23).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m.Restore(*cp).ok());
  EXPECT_EQ(m.next_pos(), 23);
  EXPECT_EQ(m.oldest(), oldest);
  EXPECT_EQ(m.caps().rollback_window, caps.rollback_window);
  ExpectHolds(m);
  // The restored rollback reach is real.
  EXPECT_TRUE(m.Truncate(23 - caps.rollback_window).ok());
  ExpectHolds(m);
}

TEST(SwaMemoryTest, CheckpointBeyondTheGlobalPrefixFailsAndChangesNothing) {
  SwaMemory a(Geometry(), nullptr);
  Feed(a, 20);
  auto cp = a.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  SwaMemory b(Geometry(), nullptr);
  Feed(b, 12);
  EXPECT_EQ(b.Restore(*cp).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.next_pos(), 12);
  ExpectHolds(b);
}

TEST(SwaMemoryTest, FullSnapshotRebuildsAFreshMemory) {
  SwaMemory a(Geometry(), nullptr);
  Feed(a, 17, /*salt=*/3);
  auto full = a.Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->bytes(), a.Bytes(SnapshotScope::kFull));
  SwaMemory b(Geometry(), nullptr);
  Feed(b, 40);
  ASSERT_TRUE(b.Restore(*full).ok());
  EXPECT_EQ(b.next_pos(), 17);
  EXPECT_EQ(b.oldest(), a.oldest());
  EXPECT_EQ(b.caps().rollback_window, a.caps().rollback_window);
  ExpectHolds(b, /*salt=*/3);
  auto again = b.Capture(SnapshotScope::kFull);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data, full->data);
}

TEST(SwaMemoryTest, ForeignAndMalformedSnapshotsAreRefusedWithoutChange) {
  SwaMemory m(Geometry(), nullptr);
  Feed(m, 25);
  auto full = m.Capture(SnapshotScope::kFull);
  auto cp = m.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(full.ok() && cp.ok());
  Feed(m, 27);

  Snapshot foreign = *cp;
  foreign.layout ^= 1;
  Snapshot short_data = *full;
  short_data.data.resize(short_data.data.size() - 4);
  Snapshot no_header = *cp;
  no_header.data.resize(8);
  Snapshot wrong_scope = *cp;
  wrong_scope.scope = SnapshotScope::kFull;
  Snapshot wrong_pos = *cp;
  wrong_pos.pos += 1;
  SwaGeometry other = Geometry();
  other.ring_rows += 1;  // same layout value, other geometry: the header catches it
  SwaMemory o(other, nullptr);
  Feed(o, 3);
  auto other_cp = o.Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(other_cp.ok());

  for (const Snapshot* s : {&foreign, &short_data, &no_header, &wrong_scope, &wrong_pos, &*other_cp}) {
    EXPECT_EQ(m.Restore(*s).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(m.next_pos(), 27);
  }
  ExpectHolds(m);
}

TEST(SwaMemoryTest, ReserveBeyondCapacityIsResourceExhausted) {
  SwaMemory m(Geometry(), nullptr);
  Feed(m, 5);
  EXPECT_EQ(m.Reserve(1001).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m.next_pos(), 5);
  ExpectHolds(m);
}

TEST(SwaMemoryTest, WithoutLocalLayersItIsAPlainTruncatableCache) {
  SwaGeometry g = Geometry();
  g.local.clear();
  SwaMemory m(g, nullptr);
  Feed(m, 50);
  EXPECT_TRUE(m.caps().truncatable);
  EXPECT_FALSE(m.caps().has_checkpoint_state);
  EXPECT_EQ(m.caps().rollback_window, 50);
  EXPECT_TRUE(m.Truncate(3).ok());
  ExpectHolds(m);
}

}  // namespace
}  // namespace cairn
