// bench/multiturn's conversations and the two ways it drives them: in
// process through two checkpoint engines, or over gRPC against two servers
// (checkpointing on and off), keeping the reuse totals of each side.
#ifndef CAIRN_BENCH_MULTITURN_DRIVERS_H_
#define CAIRN_BENCH_MULTITURN_DRIVERS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cairn/v1/inference.grpc.pb.h"
#include "checkpoint/engine.h"

namespace cairn::bench {

struct Totals {
  int64_t prompt = 0, recomputed = 0, minimum = 0;
  int requests = 0;
  double ttft = 0;
  double client_ttft = 0;  // gRPC: send to first token read
  // gRPC: replies whose last two thirds equal their first two thirds (a
  // period dividing a third, e.g. one token repeated): dropthink's re-sent
  // reply is then a prefix of the computed one, which the minimum counts
  // as computed although only a state inside the reply could serve it.
  int replies = 0, periodic_replies = 0;
  size_t peak_bytes = 0;
};

// One message as each side sees it: [0] checkpointing on, [1] off. User
// messages are the same on both; a reply is what that side generated.
struct Msg {
  std::vector<TokenId> t[2];
};
using Msgs = std::vector<Msg>;

inline Msg Same(std::vector<TokenId> t) { return Msg{{t, t}}; }

constexpr int kReply = 48;

struct Conv {
  std::vector<TokenId> system;
  // False: the prompt is one run of tokens (a client sending plain token
  // prompts), no message boundary marked anywhere.
  bool marked = true;
  int vocab = 0;
  std::mt19937* rng = nullptr;
  std::vector<TokenId> Tokens(int n) {
    std::vector<TokenId> t(n);
    for (auto& x : t) x = 3 + static_cast<TokenId>((*rng)() % (vocab - 3));
    return t;
  }
  Msg User() { return Same(Tokens(40 + (*rng)() % 81)); }
  // The conversation as side `m` sees it: the system prompt and each message,
  // each ending a message when `marked`.
  checkpoint::Prompt Build(const Msgs& msgs, int m) const {
    checkpoint::Prompt p;
    p.AddTokens(system);
    if (marked) p.EndMessage();
    for (const auto& msg : msgs) {
      p.AddTokens(msg.t[m]);
      if (marked) p.EndMessage();
    }
    return p;
  }
};

// Runs requests on both sides (checkpointing on and off) and keeps the
// totals. A turn is one request: the conversation so far as the prompt, then
// a reply of kReply tokens.
class Driver {
 public:
  explicit Driver(std::mt19937& rng) : rng_(rng) {}
  virtual ~Driver() = default;
  // A session on both sides; returns its handle.
  virtual int NewSession() = 0;
  // One request on session `s` (over gRPC, kSessionless: none) with prompt
  // system + msgs; returns the reply each side got.
  virtual Msg Turn(int s, const Conv& c, const Msgs& msgs) = 0;
  static constexpr int kSessionless = -1;
  // Over gRPC, > 0: the client cancels each reply once it has read this
  // many tokens, and the reply is what it read.
  int cancel_after = 0;

  Totals totals[2];

 protected:
  // Positions of p that no earlier request on side m computed.
  int64_t Minimum(int m, const checkpoint::Prompt& p) const {
    size_t best = 0;
    for (const auto& path : computed_[m]) best = std::max(best, checkpoint::CommonPrefix(path, p.keys()));
    return p.positions() - p.pos_after(best);
  }
  void Computed(int m, std::span<const checkpoint::SymbolKey> keys) {
    computed_[m].emplace_back(keys.begin(), keys.end());
  }

  std::mt19937& rng_;
  int requests_ = 0;

 private:
  std::vector<std::vector<checkpoint::SymbolKey>> computed_[2];
};

// In process, through two checkpoint engines on one backend (they outlive
// it). Replies are drawn from the seeded generator (reuse does not depend on
// their content) and decoded on both sides.
std::unique_ptr<Driver> NewEngineDriver(checkpoint::CheckpointEngine* on, checkpoint::CheckpointEngine* off,
                                        std::mt19937& rng);

// Through the gRPC API of two servers on 127.0.0.1: [0] checkpointing on,
// [1] off.
std::unique_ptr<Driver> NewGrpcDriver(int port_on, int port_off, std::string model, float temperature, uint32_t seed,
                                      std::mt19937& rng);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_MULTITURN_DRIVERS_H_
