#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <tuple>

namespace cairn::bench {

const char* ClientKindName(ClientKind kind) {
  switch (kind) {
    case ClientKind::kSession:
      return "session";
    case ClientKind::kPlain:
      return "plain";
    case ClientKind::kSessionless:
      return "sessionless";
  }
  return "unknown";
}

namespace {

using Msgs = std::vector<std::vector<TokenId>>;  // user, reply, user, reply, ...

class Generator {
 public:
  explicit Generator(const WorkloadOptions& o) : o_(o), rng_(o.seed) {}

  Workload Run() {
    Workload w;
    w.options = o_;
    for (int k = 0; k < o_.system_prompts; ++k) {
      std::vector<TokenId> s = Tokens(Int(o_.system_min, o_.system_max));
      s[0] = 1;  // bos
      systems_.push_back(std::move(s));
    }
    std::vector<double> popularity;
    for (int k = 0; k < o_.system_prompts; ++k) popularity.push_back(1.0 / std::pow(k + 1.0, o_.zipf));
    std::discrete_distribution<int> pick_system(popularity.begin(), popularity.end());
    users_.resize(static_cast<size_t>(o_.users));
    // Events: (time, order, user); expiries sort before requests at the same tick.
    using Item = std::tuple<int64_t, int, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
    for (int u = 0; u < o_.users; ++u) {
      User& user = users_[u];
      const double k = Unit();
      user.kind = k < o_.plain ? ClientKind::kPlain
                               : (k < o_.plain + o_.sessionless ? ClientKind::kSessionless : ClientKind::kSession);
      user.system = pick_system(rng_);
      user.remaining = Int(o_.requests_min, o_.requests_max);
      w.kinds.push_back(user.kind);
      queue.emplace(Int(0, o_.arrival_spread), 1, u);
    }
    while (!queue.empty()) {
      const auto [t, order, u] = queue.top();
      queue.pop();
      User& user = users_[u];
      if (order == 0) {  // an expiry, unless the user came back meanwhile
        if (user.session && user.last + o_.session_timeout == t) {
          user.session = false;
          w.events.push_back({WorkloadEvent::Type::kExpire, u, 0});
        }
        continue;
      }
      if (user.pending.empty()) NextMove(u);
      w.events.push_back({WorkloadEvent::Type::kRequest, u, w.requests.size()});
      w.requests.push_back(std::move(user.pending.front()));
      user.pending.pop_front();
      user.last = t;
      if (user.kind != ClientKind::kSessionless) {
        user.session = true;
        queue.emplace(t + o_.session_timeout, 0, u);
      }
      if (!user.pending.empty() || user.remaining > 0) {
        const int gap = Unit() < o_.idle ? Int(o_.idle_min, o_.idle_max) : Int(1, o_.think_max);
        queue.emplace(t + gap, 1, u);
      }
    }
    return w;
  }

 private:
  struct User {
    ClientKind kind = ClientKind::kSession;
    int system = 0;
    int remaining = 0;  // requests left to plan
    Msgs msgs;
    std::deque<WorkloadRequest> pending;  // planned, not yet sent
    int64_t last = -1;
    bool session = false;
  };

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double Unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  std::vector<TokenId> Tokens(int n) {
    std::vector<TokenId> t(static_cast<size_t>(n));
    for (TokenId& x : t) x = 3 + static_cast<TokenId>(rng_() % static_cast<uint64_t>(o_.vocab - 3));
    return t;
  }
  std::vector<TokenId> UserMessage() { return Tokens(Int(o_.user_min, o_.user_max)); }

  // Queues a request of `msgs` for user u, and appends its reply to msgs.
  void Send(int u, Msgs& msgs, const std::string& move) {
    User& user = users_[u];
    WorkloadRequest r;
    r.user = u;
    r.kind = user.kind;
    r.move = move;
    r.prompt = systems_[static_cast<size_t>(user.system)];
    const bool marks = user.kind != ClientKind::kPlain;
    if (marks) r.message_ends.push_back(r.prompt.size());
    for (const auto& m : msgs) {
      r.prompt.insert(r.prompt.end(), m.begin(), m.end());
      if (marks) r.message_ends.push_back(r.prompt.size());
    }
    r.reply = Tokens(o_.reply);
    msgs.push_back(r.reply);
    user.pending.push_back(std::move(r));
    --user.remaining;
  }

  void NextMove(int u) {
    User& user = users_[u];
    Msgs& m = user.msgs;
    const bool has_reply = m.size() >= 2 && m.size() % 2 == 0;
    const double x = Unit();
    if (user.kind == ClientKind::kPlain) {
      // Client-side context management: the oldest turns go first.
      bool trimmed = false;
      auto tokens = [&m] {
        size_t n = 0;
        for (const auto& msg : m) n += msg.size();
        return n;
      };
      while (m.size() >= 4 && tokens() + static_cast<size_t>(o_.user_max) > static_cast<size_t>(o_.window)) {
        m.erase(m.begin(), m.begin() + 2);
        trimmed = true;
      }
      std::string move = trimmed ? "trim" : "append";
      if (!trimmed && x < 0.15 && m.size() >= 4) {
        // Edit (redact, summarize) a user message in the first half.
        Edit(m[2 * static_cast<size_t>(Int(0, static_cast<int>(m.size() / 4)))]);
        move = "early_edit";
      } else if (!trimmed && x < 0.30 && has_reply) {
        // The previous reply re-sent cut short (a client-side stop).
        auto& reply = m.back();
        reply.resize(reply.size() * static_cast<size_t>(Int(50, 90)) / 100);
        move = "cutreply";
      }
      m.push_back(UserMessage());
      Send(u, m, move);
      return;
    }
    if (user.kind == ClientKind::kSessionless) {
      if (x < 0.2 && has_reply) {
        m.pop_back();
        Send(u, m, "regenerate");
      } else if (x < 0.4 && has_reply) {
        m.pop_back();
        Edit(m.back());
        Send(u, m, "edit");
      } else {
        m.push_back(UserMessage());
        Send(u, m, "append");
      }
      return;
    }
    if (x < 0.10 && has_reply) {
      m.pop_back();
      Send(u, m, "regenerate");
    } else if (x < 0.20 && has_reply) {
      m.pop_back();
      Edit(m.back());
      Send(u, m, "edit");
    } else if (x < 0.30 && has_reply) {
      auto& reply = m.back();
      reply.erase(reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(reply.size() / 3));
      m.push_back(UserMessage());
      Send(u, m, "dropthink");
    } else if (x < 0.40 && m.size() >= 6) {
      // Back two turns, two new turns, then the main line goes on.
      Msgs main = m;
      Msgs b(m.begin(), m.end() - 4);
      for (int t = 0; t < 2; ++t) {
        b.push_back(UserMessage());
        Send(u, b, "branch");
      }
      main.push_back(UserMessage());
      Send(u, main, "branch_return");
      m = std::move(main);
    } else if (x < 0.55 && m.size() >= 4) {
      // A tree: three alternatives of an earlier user message, each
      // answered; the conversation goes on from the last one.
      const size_t k = static_cast<size_t>(Int(1, static_cast<int>(m.size() / 2) - 1));
      Msgs alt;
      for (int j = 0; j < 3; ++j) {
        alt.assign(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(2 * k));
        alt.push_back(UserMessage());
        Send(u, alt, "tree");
      }
      m = std::move(alt);
    } else {
      m.push_back(UserMessage());
      Send(u, m, "append");
    }
  }

  // The second half of a message rewritten.
  void Edit(std::vector<TokenId>& msg) {
    const size_t half = msg.size() / 2;
    auto fresh = Tokens(static_cast<int>(msg.size() - half));
    std::copy(fresh.begin(), fresh.end(), msg.begin() + static_cast<std::ptrdiff_t>(half));
  }

  const WorkloadOptions o_;
  std::mt19937_64 rng_;
  std::vector<std::vector<TokenId>> systems_;
  std::vector<User> users_;
};

}  // namespace

Workload MakeWorkload(const WorkloadOptions& options) { return Generator(options).Run(); }

}  // namespace cairn::bench
