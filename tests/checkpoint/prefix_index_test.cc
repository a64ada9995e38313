#include "checkpoint/prefix_index.h"

#include <map>
#include <random>

#include "checkpoint/prompt.h"
#include "gtest/gtest.h"

namespace cairn::checkpoint {
namespace {

std::unique_ptr<PrefixIndex> MakeIndex() {
  auto index = PrefixIndex::Create();
  EXPECT_TRUE(index.ok());
  return std::move(*index);
}

IndexEntry E(uint64_t id, EntryKind kind = EntryKind::kCheckpoint) {
  IndexEntry e;
  e.id = id;
  e.kind = kind;
  return e;
}

using Keys = std::vector<SymbolKey>;

TEST(PathKeyTest, PrefixPathKeysAreThePathKeysOfEachPrefixDeepestFirst) {
  Keys path;
  for (uint64_t k = 0; k < 70; ++k) path.push_back(k * 7919 + (k % 3 == 0 ? kChunkKeyBit : 0));
  const std::vector<uint64_t> keys = PrefixPathKeys("tenant", path, 5, 70);
  ASSERT_EQ(keys.size(), 65u);
  for (size_t k = 6; k <= 70; ++k) {
    EXPECT_EQ(keys[70 - k], PathKey("tenant", std::span<const SymbolKey>(path).first(k))) << k;
  }
  EXPECT_NE(PrefixPathKeys("other", path, 69, 70)[0], keys[0]);  // tenants apart
  EXPECT_TRUE(PrefixPathKeys("tenant", path, 70, 70).empty());
  EXPECT_EQ(PrefixPathKeys("tenant", path, 68, 99).size(), 2u);  // clamped to the path
}

TEST(PrefixIndexTest, FindsEntriesAlongThePathAndTheMatchDepth) {
  auto index = MakeIndex();
  ASSERT_TRUE(index->Insert("", Keys{1, 2, 3}, E(10)).ok());
  ASSERT_TRUE(index->Insert("", Keys{1, 2, 3, 4, 5}, E(11, EntryKind::kFull)).ok());
  ASSERT_TRUE(index->Insert("", Keys{1, 2, 9}, E(12, EntryKind::kLive)).ok());  // splits the edge
  ASSERT_TRUE(index->Insert("", Keys{1}, E(13)).ok());
  IndexMatch m = index->Lookup("", Keys{1, 2, 3, 4, 7, 8});
  EXPECT_EQ(m.matched, 4u);
  ASSERT_EQ(m.on_path.size(), 2u);
  EXPECT_EQ(m.on_path[0].entry.id, 13u);
  EXPECT_EQ(m.on_path[0].depth, 1u);
  EXPECT_EQ(m.on_path[1].entry.id, 10u);
  EXPECT_EQ(m.on_path[1].depth, 3u);
  ASSERT_EQ(m.below.size(), 1u);  // the full snapshot at {1,2,3,4,5}: shares 4 symbols
  EXPECT_EQ(m.below[0].entry.id, 11u);
  EXPECT_EQ(m.below[0].depth, 5u);

  m = index->Lookup("", Keys{1, 2, 9, 9});
  EXPECT_EQ(m.matched, 3u);
  ASSERT_EQ(m.on_path.size(), 2u);
  EXPECT_EQ(m.on_path[1].entry.id, 12u);
  EXPECT_TRUE(m.below.empty());

  m = index->Lookup("", Keys{1, 2});
  EXPECT_EQ(m.matched, 2u);
  // Off-path checkpoint-scope entries are useless as bases and not listed.
  for (auto& hit : m.below) EXPECT_NE(hit.entry.kind, EntryKind::kCheckpoint);
  EXPECT_EQ(m.below.size(), 2u);

  m = index->Lookup("", Keys{7});
  EXPECT_EQ(m.matched, 0u);
  EXPECT_TRUE(m.on_path.empty());
}

TEST(PrefixIndexTest, TenantsAreIsolated) {
  auto index = MakeIndex();
  ASSERT_TRUE(index->Insert("alice", Keys{1, 2, 3}, E(1, EntryKind::kFull)).ok());
  EXPECT_EQ(index->Lookup("bob", Keys{1, 2, 3}).on_path.size(), 0u);
  EXPECT_EQ(index->Lookup("", Keys{1, 2, 3}).matched, 0u);
  EXPECT_EQ(index->Lookup("alice", Keys{1, 2, 3}).on_path.size(), 1u);
}

TEST(PrefixIndexTest, RejectsDuplicateIdsAndRemovalPrunes) {
  auto index = MakeIndex();
  ASSERT_TRUE(index->Insert("", Keys{1, 2, 3}, E(1)).ok());
  EXPECT_EQ(index->Insert("", Keys{4}, E(1)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(index->Insert("", Keys{4}, E(0)).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(index->Insert("", Keys{1, 2, 4}, E(2)).ok());
  ASSERT_TRUE(index->Insert("t", Keys{1}, E(3)).ok());
  EXPECT_TRUE(index->Remove(1));
  EXPECT_FALSE(index->Remove(1));
  EXPECT_EQ(index->Lookup("", Keys{1, 2, 4}).on_path.size(), 1u);
  EXPECT_EQ(index->Lookup("", Keys{1, 2, 3}).matched, 2u);
  EXPECT_TRUE(index->Remove(2));
  EXPECT_TRUE(index->Remove(3));
  EXPECT_EQ(index->entries(), 0u);
  EXPECT_EQ(index->nodes(), 0u);
}

TEST(PrefixIndexTest, ChunksAreAtomicSymbols) {
  // Two chunks with the same geometry but different rows are different
  // symbols: a prompt with the second never matches into the first.
  std::vector<float> a(4 * 8, 1.0f), b = a;
  b.back() = 3.0f;
  SymbolKey ka = ChunkKey(EmbeddingChunk{a.data(), 2, 2}, 8);
  SymbolKey kb = ChunkKey(EmbeddingChunk{b.data(), 2, 2}, 8);
  auto index = MakeIndex();
  ASSERT_TRUE(index->Insert("", Keys{1, ka, 5}, E(1, EntryKind::kFull)).ok());
  IndexMatch m = index->Lookup("", Keys{1, kb, 5});
  EXPECT_EQ(m.matched, 1u);
  EXPECT_TRUE(m.on_path.empty());
  EXPECT_EQ(index->Lookup("", Keys{1, ka, 5}).on_path.size(), 1u);
}

// Random inserts, removals and lookups against a brute-force model.
TEST(PrefixIndexTest, MatchesBruteForceModel) {
  std::mt19937 rng(7);
  auto index = MakeIndex();
  std::map<uint64_t, std::pair<Keys, EntryKind>> model;
  uint64_t next = 1;
  auto random_path = [&]() {
    Keys k;
    size_t n = rng() % 12;
    for (size_t i = 0; i < n; ++i) k.push_back(rng() % 3);
    return k;
  };
  for (int step = 0; step < 3000; ++step) {
    int op = rng() % 10;
    if (op < 4) {
      Keys k = random_path();
      EntryKind kind = static_cast<EntryKind>(rng() % 3);
      ASSERT_TRUE(index->Insert("", k, E(next, kind)).ok());
      model[next++] = {k, kind};
    } else if (op < 6 && !model.empty()) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      EXPECT_TRUE(index->Remove(it->first));
      model.erase(it);
    } else {
      Keys q = random_path();
      IndexMatch m = index->Lookup("", q, 1000);
      size_t matched = 0;
      std::multimap<size_t, uint64_t> on_path;
      std::set<uint64_t> below;
      for (auto& [id, e] : model) matched = std::max(matched, CommonPrefix(e.first, q));
      for (auto& [id, e] : model) {
        size_t c = CommonPrefix(e.first, q);
        if (c == e.first.size()) {
          on_path.insert({c, id});
        } else if (c == matched && e.second != EntryKind::kCheckpoint) {
          below.insert(id);
        }
      }
      if (model.empty()) matched = 0;
      EXPECT_EQ(m.matched, matched);
      ASSERT_EQ(m.on_path.size(), on_path.size());
      std::set<uint64_t> got_path, want_path;
      for (size_t i = 0; i < m.on_path.size(); ++i) {
        if (i > 0) {
          EXPECT_LE(m.on_path[i - 1].depth, m.on_path[i].depth);
        }
        got_path.insert(m.on_path[i].entry.id);
        EXPECT_EQ(m.on_path[i].depth, model[m.on_path[i].entry.id].first.size());
      }
      for (auto& [d, id] : on_path) want_path.insert(id);
      EXPECT_EQ(got_path, want_path);
      std::set<uint64_t> got_below;
      for (auto& h : m.below) got_below.insert(h.entry.id);
      EXPECT_EQ(got_below, below);
    }
  }
  for (auto& [id, e] : model) EXPECT_TRUE(index->Remove(id));
  EXPECT_EQ(index->nodes(), 0u);
}

}  // namespace
}  // namespace cairn::checkpoint
