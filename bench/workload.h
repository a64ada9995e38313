// A seeded chat workload for bench/pressure: many users, a few long system
// prompts shared with Zipf popularity, multi-turn conversations with the moves
// clients make (append, regenerate, edit, dropthink, branch, tree, and for
// clients that mark no message boundaries: trim the oldest turn, edit an early
// turn, re-send a reply cut short), think times, idle gaps after which the
// server has expired the session, and arrivals interleaved in time.
//
// The trace is fixed before anything runs (replies are drawn from the seeded
// generator, not sampled from a model), so every policy sees exactly the same
// requests, and an offline policy may read the future.
#ifndef CAIRN_BENCH_WORKLOAD_H_
#define CAIRN_BENCH_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/memory.h"

namespace cairn::bench {

enum class ClientKind : uint8_t {
  kSession,      // a session per conversation, message boundaries marked
  kPlain,        // a session, plain token prompts (no boundaries); trims and edits early turns
  kSessionless,  // boundaries marked, no session: each request on a fresh sequence, parked after
};
const char* ClientKindName(ClientKind kind);

struct WorkloadOptions {
  int users = 64;
  int system_prompts = 4;
  int system_min = 256, system_max = 512;   // tokens
  double zipf = 1.1;                        // popularity of system prompt k ~ 1 / k^zipf
  int requests_min = 4, requests_max = 12;  // per user
  int user_min = 40, user_max = 120;        // tokens per user message
  int reply = 32;                           // tokens per reply
  // Shares of the client kinds (the rest: kSession).
  double plain = 0.25, sessionless = 0.2;
  // Plain clients keep their conversation (system prompt excluded) under this
  // many tokens by dropping the oldest turns.
  int window = 768;
  // Time in ticks: arrivals spread over `arrival_spread`; after a request a
  // user thinks 1..think_max ticks, or with probability `idle` goes away for
  // idle_min..idle_max; a session unused for `session_timeout` ticks expires.
  int arrival_spread = 200;
  int think_max = 30;
  double idle = 0.2;
  int idle_min = 150, idle_max = 400;
  int session_timeout = 120;
  int vocab = 512;
  uint32_t seed = 1;
};

struct WorkloadRequest {
  int user = 0;
  ClientKind kind = ClientKind::kSession;
  std::string move;                  // "append", "regenerate", ...
  std::vector<TokenId> prompt;       // the whole conversation as sent
  std::vector<size_t> message_ends;  // symbol counts ending a message; empty for plain clients
  std::vector<TokenId> reply;        // what the model "answers" (decoded after the prompt)
};

// In time order: a request, or the server expiring a user's session.
struct WorkloadEvent {
  enum class Type : uint8_t { kRequest, kExpire } type = Type::kRequest;
  int user = 0;
  size_t request = 0;  // index into Workload::requests (kRequest)
};

struct Workload {
  WorkloadOptions options;
  std::vector<WorkloadRequest> requests;
  std::vector<WorkloadEvent> events;
  std::vector<ClientKind> kinds;  // per user
};

Workload MakeWorkload(const WorkloadOptions& options);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_WORKLOAD_H_
