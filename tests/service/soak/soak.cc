// cairn_soak: a seeded, multi-threaded client soaking a real cairn-server
// (a child process, over real gRPC sockets) with the mix of issue 30 and
// faults: SIGKILL and restart on the same --session-dir and checkpoint disk
// tier, and a full or failing disk (CAIRN_TESTING_DISK_FAULTS, see
// checkpoint/injected_faults.h). Worker threads check their sessions after
// every step (worker.h); between rounds, with no call running, the main
// thread checks that the request counters on /metrics equal the calls made
// by status code and that memory stays within the budget, then maybe kills
// and restarts the server and checks every session again.
//
// Usage: cairn_soak --server=build/service/cairn-server --model=FILE.gguf
//          [--seconds=60] [--seed=1] [--threads=4] [--round-seconds=4]
// Exit 0: no violation; 1: violations (each printed as "VIOLATION: ...");
// 2: bad flags; 77: the model file is absent outside CI (skipped).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "service/programs/flags.h"
#include "tests/service/soak/server_process.h"
#include "tests/service/soak/worker.h"

namespace cairn::soak {
namespace {

constexpr char kUsage[] = R"(cairn_soak: soak a real cairn-server with faults (issue 30)

  --server=PATH         the cairn-server binary (required)
  --model=FILE          the GGUF model to serve (required)
  --seconds=N           how long (default 60)
  --seed=N              the seed of every random choice (default 1)
  --threads=N           client threads (default 4)
  --round-seconds=N     steps between two global checks (default 4)
  --kill-rate=P         chance of a SIGKILL and restart after a round (default 0.5)
  --max-rss-mib=N       the server's RSS limit (default 1024)
)";

struct Flags {
  std::string server, model;
  int64_t seconds = 60, seed = 1, threads = 4, round_seconds = 4, max_rss_mib = 1024;
  double kill_rate = 0.5;
};

struct Totals {
  int64_t rounds = 0, kills = 0, injected_faults = 0, deadlines_counted_cancelled = 0;
};

// The server's arguments: small budgets, so that checkpoints spill to the
// disk tier and the budget is exercised.
std::vector<std::string> ServerArgs(const Flags& f, const std::string& dir) {
  return {"--model=m=" + f.model,
          "--max-context=2048",
          "--threads=1",
          "--log-level=info",  // the access log explains a counter that differs
          "--shutdown-grace=2",
          "--memory-budget=64MiB",
          "--session-dir=" + dir + "/sessions",
          "--checkpoint-disk-dir=" + dir + "/checkpoints",
          "--checkpoint-ram=256KiB",
          "--checkpoint-disk-budget=4MiB"};
}

// "code" and "method" of a cairn_requests_total sample name.
std::string Label(const std::string& sample, const std::string& name) {
  const size_t at = sample.find(name + "=\"");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 2;
  return sample.substr(from, sample.find('"', from) - from);
}

// A client's deadline cancels its call as an explicit cancel does (HTTP/2
// RST_STREAM CANCEL): the server counts DEADLINE_EXCEEDED only when its own
// early stop (generate_call.cc StopTime: a tenth of a 30 ms deadline) came
// first, else CANCELLED. So Generate's two codes are compared as one sum,
// and the server's deadlines must not exceed the client's.
void MergeClientEnded(std::map<std::pair<std::string, std::string>, int64_t>& calls) {
  int64_t ended = 0;
  for (const char* code : {"CANCELLED", "DEADLINE_EXCEEDED"}) {
    auto it = calls.find({"Generate", code});
    if (it == calls.end()) continue;
    ended += it->second;
    calls.erase(it);
  }
  if (ended > 0) calls[{"Generate", "CANCELLED+DEADLINE_EXCEEDED"}] = ended;
}

// The counters equal the calls made, but for cut-short calls: one whose
// deadline passed before it reached a handler is not counted, one the
// server ended OK just before its client's cancel or deadline took effect
// is counted OK (the race), and one that reached the server after its
// client gave up may meet a session the client has since deleted
// (NOT_FOUND) or is using again (ABORTED). So Generate's OK, NOT_FOUND and
// ABORTED may exceed the client's by as many cut-short calls as the server
// did not count as such.
bool SameCalls(std::map<std::pair<std::string, std::string>, int64_t> made,
               std::map<std::pair<std::string, std::string>, int64_t> counted) {
  const std::pair<std::string, std::string> ended = {"Generate", "CANCELLED+DEADLINE_EXCEEDED"};
  int64_t unexplained = made[ended] - counted[ended];
  if (unexplained < 0) return false;
  for (const char* code : {"OK", "NOT_FOUND", "ABORTED"}) {
    const std::pair<std::string, std::string> key = {"Generate", code};
    const int64_t late = counted[key] - made[key];
    if (late < 0 || late > unexplained) return false;
    unexplained -= late;
    made.erase(key);
    counted.erase(key);
  }
  made.erase(ended);
  counted.erase(ended);
  for (auto* calls : {&made, &counted}) std::erase_if(*calls, [](const auto& kv) { return kv.second == 0; });
  return made == counted;
}

// Counters equal the calls made, memory within the budget, RSS sane. The
// counters settle after the client saw a status (a cancelled call ends on
// the server a little later): waits up to 10 s for them. Adds the client's
// deadlines the server counted as cancels to `deadlines_counted_cancelled`.
void CheckServer(const ServerProcess& server, Tally& tally, const Flags& f, int64_t* deadlines_counted_cancelled) {
  auto expected = tally.CallsByCode();
  const int64_t client_deadlines = expected[{"Generate", "DEADLINE_EXCEEDED"}];
  MergeClientEnded(expected);
  std::map<std::pair<std::string, std::string>, int64_t> counted;
  int64_t server_deadlines = 0;
  std::map<std::string, double> metrics;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto scraped = server.Metrics();
    if (!scraped.ok()) {
      tally.Violation(absl::StrCat("metrics: ", scraped.status().ToString()));
      return;
    }
    metrics = *scraped;
    counted.clear();
    for (const auto& [sample, value] : metrics) {
      if (sample.rfind("cairn_requests_total{", 0) != 0 || value == 0) continue;
      counted[{Label(sample, "method"), Label(sample, "code")}] += static_cast<int64_t>(value);
    }
    server_deadlines = counted[{"Generate", "DEADLINE_EXCEEDED"}];
    MergeClientEnded(counted);
    if (SameCalls(expected, counted)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!SameCalls(expected, counted)) {
    std::string diff;
    std::set<std::pair<std::string, std::string>> keys;
    for (const auto& [k, v] : expected) keys.insert(k);
    for (const auto& [k, v] : counted) keys.insert(k);
    for (const auto& k : keys) {
      const int64_t made = expected.count(k) ? expected.at(k) : 0, seen = counted.count(k) ? counted.at(k) : 0;
      if (made != seen) absl::StrAppend(&diff, " ", k.first, "/", k.second, " made ", made, " counted ", seen, ";");
    }
    tally.Violation("request counters differ from the calls made:" + diff);
    // The server's side of the calls counted with a code the client did not see.
    for (const auto& [k, v] : counted) {
      if (expected.count(k) != 0 || k.second.find('+') != std::string::npos) continue;
      for (const std::string& line : server.LinesWith("method=" + k.first + " ")) {
        if (line.find(" code=" + k.second + " ") != std::string::npos)
          std::fprintf(stderr, "  server: %s\n", line.c_str());
      }
    }
  }
  if (server_deadlines > client_deadlines) {
    tally.Violation(
        absl::StrCat("the server counted ", server_deadlines, " deadlines, the client saw ", client_deadlines));
  }
  *deadlines_counted_cancelled += client_deadlines - server_deadlines;
  const double used = metrics["cairn_sequence_memory_bytes"], budget = metrics["cairn_memory_budget_bytes"];
  if (budget <= 0 || used > budget) {
    tally.Violation(absl::StrCat("sequence memory ", used, " bytes, budget ", budget));
  }
  if (const size_t rss = server.RssBytes(); rss == 0 || rss > static_cast<size_t>(f.max_rss_mib) << 20) {
    tally.Violation(absl::StrCat("server RSS ", rss >> 20, " MiB (limit ", f.max_rss_mib, " MiB)"));
  }
}

std::shared_ptr<grpc::Channel> ChannelTo(const ServerProcess& server) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials());
}

// The sessions whose files an injected write fault hit in this run.
std::set<std::string> SessionsWithFailedWrites(const ServerProcess& server) {
  std::set<std::string> ids;
  for (const std::string& line : server.LinesWith("injected disk fault: write ")) {
    const size_t end = line.find(".session");
    const size_t slash = line.rfind('/', end);
    if (end != std::string::npos && slash != std::string::npos) ids.insert(line.substr(slash + 1, end - slash - 1));
  }
  return ids;
}

int Run(const Flags& f) {
  char tmpl[] = "/tmp/cairn-soak-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  std::mt19937_64 rng(static_cast<uint64_t>(f.seed));
  Tally tally;
  Totals totals;

  ServerProcess reference(f.server,
                          {"--model=m=" + f.model, "--max-context=512", "--threads=1", "--log-level=warning",
                           "--checkpoints=off", "--memory-budget=256MiB"},
                          {});
  if (absl::Status st = reference.Start(); !st.ok()) {
    std::fprintf(stderr, "cairn_soak: reference server: %s\n", st.ToString().c_str());
    return 1;
  }
  std::string faults = "none";
  auto server = std::make_unique<ServerProcess>(f.server, ServerArgs(f, dir), std::vector<std::string>{});
  if (absl::Status st = server->Start(); !st.ok()) {
    std::fprintf(stderr, "cairn_soak: %s\n", st.ToString().c_str());
    return 1;
  }

  WorkerOptions options;
  options.model = "m";
  for (int i = 0; i < 24; ++i) options.shared_prefix.push_back(static_cast<int32_t>(3 + rng() % 497));
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < f.threads; ++i) workers.push_back(std::make_unique<Worker>(i, rng(), options, tally));

  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(f.seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (auto& w : workers) w->Connect(ChannelTo(*server), ChannelTo(reference), faults != "none");
    const auto round_end = std::min(end, std::chrono::steady_clock::now() + std::chrono::seconds(f.round_seconds));
    std::vector<std::thread> threads;
    for (auto& w : workers) threads.emplace_back([&w, round_end] { w->RunUntil(round_end); });
    for (std::thread& t : threads) t.join();
    ++totals.rounds;
    CheckServer(*server, tally, f, &totals.deadlines_counted_cancelled);
    if (std::chrono::steady_clock::now() >= end || std::uniform_real_distribution<double>(0, 1)(rng) >= f.kill_rate) {
      continue;
    }
    // SIGKILL, then a restart on the same directories, maybe on a bad disk.
    const std::set<std::string> may_be_lost = SessionsWithFailedWrites(*server);
    totals.injected_faults += static_cast<int64_t>(server->LinesWith("injected disk fault").size());
    server->Kill();
    ++totals.kills;
    const int mode = static_cast<int>(rng() % 3);
    faults = mode == 0 ? "none" : mode == 1 ? "full" : absl::StrCat("failing:0.2:", rng() % 1000);
    std::vector<std::string> env;
    if (faults != "none") env.push_back("CAIRN_TESTING_DISK_FAULTS=" + faults);
    server = std::make_unique<ServerProcess>(f.server, ServerArgs(f, dir), env);
    if (absl::Status st = server->Start(); !st.ok()) {
      tally.Violation("restart: " + st.ToString());
      break;
    }
    std::printf("round %lld: killed and restarted (disk faults: %s)\n", static_cast<long long>(totals.rounds),
                faults.c_str());
    std::fflush(stdout);
    tally.ResetCallsByCode();
    for (auto& w : workers) {
      w->Connect(ChannelTo(*server), ChannelTo(reference), faults != "none");
      w->VerifyAfterRestart(may_be_lost);
    }
    CheckServer(*server, tally, f, &totals.deadlines_counted_cancelled);
  }
  totals.injected_faults += static_cast<int64_t>(server->LinesWith("injected disk fault").size());
  if (absl::Status st = server->Stop(); !st.ok()) tally.Violation("shutdown: " + st.ToString());
  reference.Kill();
  std::filesystem::remove_all(dir);

  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "soak %s seed %lld threads %lld: %.0f s, %lld rounds, %lld calls, %lld cancels, %lld deadlines, %lld races "
      "(turns ended OK that their client saw fail), %lld kills, "
      "%lld injected disk faults (%lld disk errors seen, %lld sessions lost with a failed write), %lld session "
      "checks, %lld fresh checks, %lld client deadlines the server counted as cancels or OK or never saw, %lld "
      "violations\n",
      std::filesystem::path(f.model).stem().c_str(), static_cast<long long>(f.seed), static_cast<long long>(f.threads),
      elapsed, static_cast<long long>(totals.rounds), static_cast<long long>(tally.calls.load()),
      static_cast<long long>(tally.cancels.load()), static_cast<long long>(tally.deadlines.load()),
      static_cast<long long>(tally.races.load()), static_cast<long long>(totals.kills),
      static_cast<long long>(totals.injected_faults), static_cast<long long>(tally.disk_errors_seen.load()),
      static_cast<long long>(tally.sessions_lost.load()), static_cast<long long>(tally.sessions_checked.load()),
      static_cast<long long>(tally.fresh_checks.load()), static_cast<long long>(totals.deadlines_counted_cancelled),
      static_cast<long long>(tally.violations.load()));
  return tally.violations.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace cairn::soak

int main(int argc, char** argv) {
  cairn::soak::Flags f;
  cairn::service::FlagParser flags("cairn_soak");
  flags.Add("server", &f.server);
  flags.Add("model", &f.model);
  flags.Add("seconds", &f.seconds, 1);
  flags.Add("seed", &f.seed);
  flags.Add("threads", &f.threads, 1);
  flags.Add("round-seconds", &f.round_seconds, 1);
  flags.Add("kill-rate", &f.kill_rate, 0.0);
  flags.Add("max-rss-mib", &f.max_rss_mib, 1);
  if (auto outcome = flags.Parse(argc, argv, cairn::soak::kUsage);
      outcome != cairn::service::FlagParser::Outcome::kRun) {
    return cairn::service::FlagParser::ExitCode(outcome);
  }
  if (f.server.empty() || f.model.empty()) {
    std::fprintf(stderr, "cairn_soak: --server and --model are required\n%s", cairn::soak::kUsage);
    return 2;
  }
  if (!std::filesystem::exists(f.model)) {
    const char* ci = std::getenv("CI");
    std::fprintf(stderr, "cairn_soak: model %s not present%s\n", f.model.c_str(),
                 ci != nullptr && std::string(ci) == "true" ? " (required under CI)" : "; skipped");
    return ci != nullptr && std::string(ci) == "true" ? 1 : 77;
  }
  return cairn::soak::Run(f);
}
