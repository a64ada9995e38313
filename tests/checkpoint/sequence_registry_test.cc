// The registry of live sequences, on real sequence memories (a golden
// model's): ids apart from store ids, lookups while a sequence lives, and its
// entry in the prefix index.
#include "checkpoint/sequence_registry.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_testing.h"

namespace cairn::checkpoint {
namespace {

class SequenceRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED("golden/models/llama.gguf");
    auto backend = testing::LoadBackend("golden/models/llama.gguf");
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    auto index = PrefixIndex::Create();
    ASSERT_TRUE(index.ok()) << index.status();
    index_ = std::move(*index);
  }

  std::unique_ptr<SequenceMemory> Memory() {
    auto memory = backend_->NewSequence();
    EXPECT_TRUE(memory.ok()) << memory.status();
    return memory.ok() ? std::move(*memory) : nullptr;
  }

  // The live entries on `keys`' path in `tenant`'s partition of the index.
  size_t LiveEntries(const std::string& tenant, std::span<const SymbolKey> keys, uint64_t id) const {
    size_t n = 0;
    for (const IndexHit& h : index_->Lookup(tenant, keys, 0).on_path) {
      n += h.entry.kind == EntryKind::kLive && h.entry.id == id && h.depth == keys.size();
    }
    return n;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<PrefixIndex> index_;
};

TEST_F(SequenceRegistryTest, GivesIdsApartFromStoreIdsAndFindsLiveSequences) {
  SequenceRegistry registry(*index_, /*publish=*/true);
  std::shared_ptr<SequenceState> a = registry.Add("t", Memory());
  std::shared_ptr<SequenceState> b = registry.Add("t", Memory());
  EXPECT_NE(a->live_id, b->live_id);
  EXPECT_TRUE(SequenceRegistry::IsLiveId(a->live_id));
  EXPECT_FALSE(SequenceRegistry::IsLiveId(1));  // a store id
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.Find(a->live_id), a);
  registry.Remove(b->live_id);
  EXPECT_EQ(registry.Find(b->live_id), nullptr);
  EXPECT_EQ(registry.size(), 1u);
  // Registered but gone (its owner dropped it before Remove): not found.
  const uint64_t id = a->live_id;
  a.reset();
  EXPECT_EQ(registry.Find(id), nullptr);
}

TEST_F(SequenceRegistryTest, PublishesASequenceAtItsHistory) {
  SequenceRegistry registry(*index_, /*publish=*/true);
  std::shared_ptr<SequenceState> s = registry.Add("t", Memory());
  SequenceLock lock(s->mu);
  registry.Publish(*s);  // an empty history is not published
  EXPECT_EQ(index_->entries(), 0u);
  for (SymbolKey k : {5, 6, 7}) s->history.Push(k, 1);
  registry.Publish(*s);
  EXPECT_EQ(LiveEntries("t", s->history.keys(), s->live_id), 1u);
  EXPECT_EQ(LiveEntries("other", s->history.keys(), s->live_id), 0u);
  s->history.Push(8, 1);
  registry.Publish(*s);  // moves: one entry, at the new history
  EXPECT_EQ(index_->entries(), 1u);
  EXPECT_EQ(LiveEntries("t", s->history.keys(), s->live_id), 1u);
  registry.Unpublish(s->live_id);
  EXPECT_EQ(index_->entries(), 0u);
  EXPECT_EQ(registry.Find(s->live_id), s);  // still registered
}

TEST_F(SequenceRegistryTest, PublishesNothingWhenCheckpointingIsOff) {
  SequenceRegistry registry(*index_, /*publish=*/false);
  std::shared_ptr<SequenceState> s = registry.Add("t", Memory());
  SequenceLock lock(s->mu);
  s->history.Push(5, 1);
  registry.Publish(*s);
  EXPECT_EQ(index_->entries(), 0u);
}

}  // namespace
}  // namespace cairn::checkpoint
