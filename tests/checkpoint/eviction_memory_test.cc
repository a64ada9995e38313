#include "checkpoint/eviction_memory.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "tests/checkpoint/recording_retention.h"

namespace cairn::checkpoint {
namespace {

RetentionFacts OnPath(uint64_t path_key, SnapshotScope scope = SnapshotScope::kFull) {
  RetentionFacts f;
  f.path_key = path_key;
  f.scope = scope;
  return f;
}

RetentionClock AtRequest(uint64_t request) { return RetentionClock{0, request}; }

TEST(EvictionMemoryTest, RemembersOnePerPathAndTellsEachOutcomeOnce) {
  RecordingRetention policy;
  EvictionMemory memory(policy);
  EXPECT_TRUE(memory.empty());
  RetentionFacts first = OnPath(1);
  memory.Remember(first, AtRequest(1));
  EXPECT_TRUE(first.remembered);
  RetentionFacts again = OnPath(1, SnapshotScope::kCheckpoint);
  memory.Remember(again, AtRequest(2));
  EXPECT_FALSE(again.remembered);  // the older one on that path stays
  RetentionFacts no_path = OnPath(0);
  memory.Remember(no_path, AtRequest(2));
  EXPECT_FALSE(no_path.remembered);
  EXPECT_TRUE(policy.seen.empty());  // remembering tells nothing yet

  const uint64_t prompt[] = {7, 1};
  memory.NoteMissed(prompt, 0, AtRequest(3));
  ASSERT_EQ(policy.Of(RetentionEvent::kMissed).size(), 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kMissed)[0].path_key, 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kMissed)[0].request, 3u);
  EXPECT_TRUE(memory.empty());
  memory.NoteMissed(prompt, 0, AtRequest(4));
  memory.ForgetOld(AtRequest(100));
  EXPECT_EQ(policy.seen.size(), 1u);  // missed once, never forgotten after
}

TEST(EvictionMemoryTest, OnlyAFullSnapshotServesWhereTheRestOfTheMemoryIsMissing) {
  RecordingRetention policy;
  EvictionMemory memory(policy);
  RetentionFacts partial = OnPath(5, SnapshotScope::kCheckpoint);
  RetentionFacts full = OnPath(4);
  memory.Remember(partial, AtRequest(1));
  memory.Remember(full, AtRequest(1));
  const uint64_t prompt[] = {5, 4};
  memory.NoteMissed(prompt, 1, AtRequest(2));
  ASSERT_EQ(policy.Of(RetentionEvent::kMissed).size(), 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kMissed)[0].path_key, 4u);
  memory.NoteMissed(prompt, 0, AtRequest(2));
  ASSERT_EQ(policy.Of(RetentionEvent::kMissed).size(), 2u);
  EXPECT_EQ(policy.Of(RetentionEvent::kMissed)[1].path_key, 5u);
}

TEST(EvictionMemoryTest, ForgetsAfterTheHorizonAndDropsWithoutAnOutcome) {
  RecordingRetention policy;
  EvictionMemory memory(policy);
  RetentionFacts kept = OnPath(1), replaced = OnPath(2);
  memory.Remember(kept, AtRequest(10));
  memory.Remember(replaced, AtRequest(10));
  memory.Drop(2);  // a new checkpoint on that path: no verdict
  memory.ForgetOld(AtRequest(10 + EvictionMemory::kMissHorizon - 1));
  EXPECT_TRUE(policy.seen.empty());
  memory.ForgetOld(AtRequest(10 + EvictionMemory::kMissHorizon));
  ASSERT_EQ(policy.Of(RetentionEvent::kForgotten).size(), 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kForgotten)[0].path_key, 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kForgotten)[0].request, 10 + EvictionMemory::kMissHorizon);
  EXPECT_TRUE(memory.empty());
  EXPECT_EQ(policy.seen.size(), 1u);
}

TEST(EvictionMemoryTest, KeepsAtMostItsCapacityForgettingTheOldest) {
  RecordingRetention policy;
  EvictionMemory memory(policy);
  for (uint64_t k = 1; k <= EvictionMemory::kCapacity + 2; ++k) {
    RetentionFacts f = OnPath(k);
    memory.Remember(f, AtRequest(1));
  }
  ASSERT_EQ(policy.Of(RetentionEvent::kForgotten).size(), 2u);
  EXPECT_EQ(policy.Of(RetentionEvent::kForgotten)[0].path_key, 1u);
  EXPECT_EQ(policy.Of(RetentionEvent::kForgotten)[1].path_key, 2u);
  const uint64_t newest[] = {EvictionMemory::kCapacity + 2};
  memory.NoteMissed(newest, 0, AtRequest(1));
  EXPECT_EQ(policy.Of(RetentionEvent::kMissed).size(), 1u);
}

TEST(EvictionMemoryTest, RemembersNothingForAPolicyThatDoesNotAsk) {
  RecordingRetention policy;
  policy.wants_misses_ = false;
  EvictionMemory memory(policy);
  RetentionFacts f = OnPath(1);
  memory.Remember(f, AtRequest(1));
  EXPECT_FALSE(f.remembered);
  EXPECT_TRUE(memory.empty());
}

}  // namespace
}  // namespace cairn::checkpoint
