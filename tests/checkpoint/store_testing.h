// Helpers for tests of the checkpoint store and its disk tier: checkpoints
// with deterministic contents, their comparison, and a temporary directory.
#ifndef CAIRN_TESTS_CHECKPOINT_STORE_TESTING_H_
#define CAIRN_TESTS_CHECKPOINT_STORE_TESTING_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "gtest/gtest.h"

namespace cairn::checkpoint {

// A checkpoint at `pos` of `bytes` snapshot bytes drawn from `seed` (full
// scope for an odd seed), with 17 logits when `logits`, tagged by the seed.
inline Checkpoint TestCheckpoint(Pos pos, size_t bytes, uint32_t seed, bool logits = false) {
  Checkpoint cp;
  cp.snapshot.pos = pos;
  cp.snapshot.scope = seed % 2 ? SnapshotScope::kFull : SnapshotScope::kCheckpoint;
  cp.snapshot.layout = 0xABCD0000u + seed;
  cp.snapshot.data.resize(bytes);
  std::mt19937 rng(seed);
  for (auto& b : cp.snapshot.data) b = static_cast<uint8_t>(rng());
  if (logits) {
    cp.logits.resize(17);
    for (size_t i = 0; i < cp.logits.size(); ++i) cp.logits[i] = 0.25f * i + seed;
  }
  cp.tag = "tag-" + std::to_string(seed);
  return cp;
}

inline void ExpectSame(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.snapshot.pos, b.snapshot.pos);
  EXPECT_EQ(a.snapshot.scope, b.snapshot.scope);
  EXPECT_EQ(a.snapshot.layout, b.snapshot.layout);
  EXPECT_EQ(a.snapshot.data, b.snapshot.data);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.tag, b.tag);
}

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cairn-ckpt-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // The files whose names end with `suffix`.
  std::vector<std::string> Files(const std::string& suffix) const {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(path_)) {
      std::string n = e.path().filename();
      if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        out.push_back(e.path());
      }
    }
    return out;
  }

 private:
  std::string path_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_TESTS_CHECKPOINT_STORE_TESTING_H_
