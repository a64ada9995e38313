// cairn-load: a load generator for a cairn server (the issue's load test and
// batching-gain figures). Without --server it starts an in-process server on
// the built-in models (or --serve=NAME=PATH).
//
//   cairn-load --model=demo-hybrid --clients=16 --seconds=60
//   cairn-load --model=demo-hybrid --batching-gain     (1 vs 8 concurrent sequences,
//                                                        alternating over --rounds=3)
//
// Each client sends its own affinity key (x-cairn-session: a run-unique
// prefix and the client's index), so behind a proxy over several replicas a
// client's requests stay on one replica, as a user's conversation would.
//
// Prints requests, errors, time to first token p50/p99 and tokens/s. Times
// are what a client sees (over a real socket), on whatever else the machine
// is doing: compare figures from the same run only. A client whose request
// failed waits before its next one, doubling the wait on each failure in a
// row up to --max-backoff, so a server that went away is not hammered.
//
// --stalled-clients=N makes N of the clients stop reading (the backpressure
// check): each opens a long Generate on a channel with a small HTTP/2 receive
// window and reads nothing until the run ends; how those calls ended is printed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "checkpoint/options.h"
#include "grpcpp/completion_queue.h"
#include "service/host/log.h"
#include "service/programs/client_channel.h"
#include "service/programs/demo_catalog.h"
#include "service/server.h"

namespace {

using Clock = std::chrono::steady_clock;

const char kUsage[] = R"(cairn-load: a load generator for a cairn server

  cairn-load [--server=HOST:PORT] [flags]

  --server=HOST:PORT   the server to load (default: an in-process server on the
                       built-in models, or on the --serve models)
  --serve=NAME=PATH    a model of the in-process server (repeatable)
  --model=NAME         model to request (default demo-hybrid)
  --clients=N          concurrent clients, each one request at a time (default 16)
  --seconds=S          duration (default 60)
  --prompt-tokens=N    random token ids per prompt (default 64)
  --max-tokens=N       tokens per reply (default 64)
  --stalled-clients=N  N of the --clients stop reading (default 0): each opens one
                       Generate of 100000 tokens with a 1 KiB HTTP/2 receive window (no
                       BDP probing) and reads nothing until the run ends; then it reads
                       for up to 2 s to learn whether the server ended the call (a
                       status arrives after the buffered tokens) and cancels it if not.
                       Prints how these calls ended; they count neither as requests nor
                       as errors
  --batching-gain      1 vs 8 concurrent decode-heavy streams, alternating --rounds=N
                       times (default 3); prints the aggregate tokens/s ratio
  --threads=N          compute threads of the in-process server (default: all cores)
  --max-backoff=S      a client waits after a failed request: 0.05 s, doubling on
                       each failure in a row, at most S seconds (default 2)
  --token=TOKEN        bearer token for a server started with --auth-token-file
  --tls-ca=PEM         connect with TLS, trusting this CA (default: the system's)
  --tls-cert=PEM --tls-key=PEM
                       client certificate and key (mutual TLS)
  --tls-server-name=N  expected name in the server's certificate
  checkpoint flags (--checkpoint-ram=..., see cairn-server --help) configure the
  in-process server.

Exit status: 0 when no request failed, 1 otherwise, 2 for a bad argument.
)";

struct Options {
  std::string server;
  std::vector<std::string> serve;
  std::string model = "demo-hybrid";
  int clients = 16;
  double seconds = 60;
  int prompt_tokens = 64;
  int max_tokens = 64;
  int stalled_clients = 0;
  bool batching_gain = false;
  int rounds = 3;                                   // --batching-gain: alternations of the 1- and 8-stream phases
  cairn::checkpoint::CheckpointOptions checkpoint;  // of the in-process server (checkpoint flags)
  int threads = 0;
  double max_backoff = 2;  // seconds
  std::string token;
  cairn::service::ClientTls tls;
};

// What the clients of one run report, each under the lock.
struct Stats {
  absl::Mutex mu;
  std::vector<double> ttft ABSL_GUARDED_BY(mu);
  // Per request: the server's Timings.decode_tokens_per_second.
  std::vector<double> decode_rates ABSL_GUARDED_BY(mu);
  int64_t tokens ABSL_GUARDED_BY(mu) = 0;
  int64_t requests ABSL_GUARDED_BY(mu) = 0;
  int64_t errors ABSL_GUARDED_BY(mu) = 0;
  std::string first_error ABSL_GUARDED_BY(mu);
  double backoff_seconds ABSL_GUARDED_BY(mu) = 0;  // slept after failures, all clients
  // A stalled client's call: how it ended, how often; tokens the stalled
  // calls had received.
  std::map<std::string, int64_t> stalled_ends ABSL_GUARDED_BY(mu);
  int64_t stalled_tokens ABSL_GUARDED_BY(mu) = 0;
};

// A key per run, so two runs' clients do not share keys.
const std::string& RunKey() {
  static const std::string key = [] {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
    return std::string(buf);
  }();
  return key;
}

cairn::v1::GenerateRequest Request(const Options& o, int max_tokens, std::mt19937& rng) {
  cairn::v1::GenerateRequest req;
  req.set_model(o.model);
  auto* ids = req.add_parts()->mutable_tokens();
  for (int i = 0; i < o.prompt_tokens; ++i) ids->add_ids(300 + static_cast<int>(rng() % 200));
  req.mutable_stop()->set_max_tokens(max_tokens);
  req.mutable_stop()->set_ignore_eos(true);
  req.mutable_sampling()->set_seed(rng());
  req.set_stream_text(false);
  return req;
}

void AddMetadata(const Options& o, int index, grpc::ClientContext* ctx) {
  ctx->AddMetadata("x-cairn-session", "load-" + RunKey() + "-" + std::to_string(index));
  if (!o.token.empty()) ctx->AddMetadata("authorization", "Bearer " + o.token);
}

// A stalled call: its status reaches the client only after the messages
// before it (HTTP/2 delivers trailers in order), so whether the server ended
// it shows only when reading. At the end of the run the call is read for up
// to 2 s: a call the server ended yields what it had buffered and its status;
// one still open keeps streaming and is cancelled.
void StalledClient(const std::string& addr, const Options& o, int index, Clock::time_point end, Stats* stats) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // else the window grows with the measured bandwidth
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stub = cairn::v1::Inference::NewStub(*cairn::service::ClientChannel(addr, o.tls, args));
  std::mt19937 rng(4321 + index);
  grpc::ClientContext ctx;
  AddMetadata(o, index, &ctx);
  grpc::CompletionQueue cq;
  auto call = stub->PrepareAsyncGenerate(&ctx, Request(o, 100000, rng), &cq);
  call->StartCall(&ctx);
  std::this_thread::sleep_until(end);
  // The completion queue's deadlines are system_clock's.
  const auto drain_end = std::chrono::system_clock::now() + std::chrono::seconds(2);
  cairn::v1::GenerateResponse ev;
  grpc::Status st;
  bool cancelled = false, ok;
  int64_t tokens = 0;
  call->Read(&ev, &ev);
  for (void* tag = nullptr; tag != &st;) {
    if (cancelled) {
      cq.Next(&tag, &ok);
    } else if (cq.AsyncNext(&tag, &ok, drain_end) == grpc::CompletionQueue::TIMEOUT) {
      ctx.TryCancel();
      cancelled = true;
      continue;
    }
    if (tag != &ev) continue;
    if (!ok) {
      call->Finish(&st, &st);
      continue;
    }
    tokens += ev.has_token() ? 1 : 0;
    call->Read(&ev, &ev);
  }
  cq.Shutdown();
  for (void* tag; cq.Next(&tag, &ok);) {
  }
  absl::MutexLock lock(&stats->mu);
  ++stats->stalled_ends[cancelled ? "still open at the end (cancelled by cairn-load)"
                                  : "ended by the server, " + cairn::service::StatusText(st)];
  stats->stalled_tokens += tokens;
}

void Client(const std::string& addr, const Options& o, int index, Clock::time_point end, Stats* stats) {
  // main checked the TLS flags with the same call.
  auto stub = cairn::v1::Inference::NewStub(*cairn::service::ClientChannel(addr, o.tls));
  std::mt19937 rng(1234 + index);
  double backoff = 0;  // seconds to wait before the next request (0 after a success)
  while (Clock::now() < end) {
    if (backoff > 0) {
      // Jittered, so that clients failing together do not retry together.
      const double wait = backoff * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
      const auto from = Clock::now();
      std::this_thread::sleep_until(std::min(end, from + std::chrono::microseconds(static_cast<int64_t>(wait * 1e6))));
      {
        absl::MutexLock lock(&stats->mu);
        stats->backoff_seconds += std::chrono::duration<double>(Clock::now() - from).count();
      }
      if (Clock::now() >= end) break;
    }
    grpc::ClientContext ctx;
    AddMetadata(o, index, &ctx);
    const auto t0 = Clock::now();
    auto reader = stub->Generate(&ctx, Request(o, o.max_tokens, rng));
    cairn::v1::GenerateResponse ev;
    double ttft = -1, decode_rate = 0;
    int64_t n = 0;
    while (reader->Read(&ev)) {
      if (ev.has_finished()) decode_rate = ev.finished().timings().decode_tokens_per_second();
      if (!ev.has_token()) continue;
      if (n++ == 0) ttft = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    grpc::Status st = reader->Finish();
    backoff = st.ok() ? 0 : std::min(o.max_backoff, backoff == 0 ? 0.05 : 2 * backoff);
    absl::MutexLock lock(&stats->mu);
    ++stats->requests;
    stats->tokens += n;
    if (!st.ok()) {
      ++stats->errors;
      if (stats->first_error.empty()) stats->first_error = cairn::service::StatusText(st);
    } else if (ttft >= 0) {
      stats->ttft.push_back(ttft);
      if (decode_rate > 0) stats->decode_rates.push_back(decode_rate);
    }
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

struct RunResult {
  double seconds = 0;
  int64_t tokens = 0, requests = 0, errors = 0;
  double p50 = 0, p99 = 0;
  double decode_rate = 0;  // mean over requests of each one's decode tokens/s
};

RunResult Run(const std::string& addr, const Options& o, int clients, double seconds) {
  Stats stats;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(i < o.stalled_clients ? StalledClient : Client, addr, std::cref(o), i, end, &stats);
  }
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&stats.mu);
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.tokens = stats.tokens;
  r.requests = stats.requests;
  r.errors = stats.errors;
  r.p50 = Percentile(stats.ttft, 0.5);
  r.p99 = Percentile(stats.ttft, 0.99);
  for (double d : stats.decode_rates) r.decode_rate += d / static_cast<double>(stats.decode_rates.size());
  if (!stats.first_error.empty()) {
    std::fprintf(stderr, "first error: %s (clients waited %.1f s in all after failures)\n", stats.first_error.c_str(),
                 stats.backoff_seconds);
  }
  for (const auto& [how, count] : stats.stalled_ends) {
    std::printf("stalled calls: %lld %s\n", static_cast<long long>(count), how.c_str());
  }
  if (o.stalled_clients > 0) {
    std::printf("stalled calls: %lld tokens received in all\n", static_cast<long long>(stats.stalled_tokens));
  }
  return r;
}

void Print(const char* label, int clients, const RunResult& r) {
  std::printf(
      "%-10s clients %2d: %lld requests, %lld errors, %lld tokens in %.1f s = %.1f tokens/s; "
      "TTFT p50 %.1f ms, p99 %.1f ms\n",
      label, clients, static_cast<long long>(r.requests), static_cast<long long>(r.errors),
      static_cast<long long>(r.tokens), r.seconds, r.tokens / r.seconds, r.p50 * 1e3, r.p99 * 1e3);
}

// Every flag of cairn-load, into `o`.
void DeclareFlags(cairn::service::FlagParser& flags, Options& o) {
  flags.Delegate([&o](std::string_view arg) { return cairn::checkpoint::ApplyCheckpointFlag(arg, &o.checkpoint); });
  flags.Switch("batching-gain", &o.batching_gain);
  flags.Add("serve", &o.serve);
  flags.Add("model", &o.model);
  flags.Add("clients", &o.clients);
  flags.Add("seconds", &o.seconds);
  flags.Add("prompt-tokens", &o.prompt_tokens);
  flags.Add("max-tokens", &o.max_tokens);
  flags.Add("stalled-clients", &o.stalled_clients, 0);
  flags.Add("rounds", &o.rounds, 1);
  flags.Add("threads", &o.threads);
  flags.Add("max-backoff", &o.max_backoff, 0.0);
  cairn::service::AddClientFlags(flags, &o.server, &o.token, &o.tls);
}

}  // namespace

int main(int argc, char** argv) {
  cairn::KeepFreedSnapshotMemory();
  Options o;
  cairn::service::FlagParser flags("cairn-load");
  DeclareFlags(flags, o);
  if (auto outcome = flags.Parse(argc, argv, kUsage); outcome != cairn::service::FlagParser::Outcome::kRun) {
    return cairn::service::FlagParser::ExitCode(outcome);
  }
  if (o.server.empty() && (o.tls.enabled() || !o.token.empty())) {
    std::fprintf(stderr, "cairn-load: --token and --tls-* are for --server (the in-process server has neither)\n");
    return 2;
  }
  if (o.stalled_clients > (o.batching_gain ? 0 : o.clients)) {
    std::fprintf(stderr, "cairn-load: --stalled-clients is at most --clients (and not for --batching-gain)\n");
    return 2;
  }
  if (auto channel = cairn::service::ClientChannel(o.server.empty() ? "127.0.0.1:1" : o.server, o.tls); !channel.ok()) {
    std::fprintf(stderr, "cairn-load: %s\n", channel.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<cairn::service::Server> server;
  std::string addr = o.server;
  if (addr.empty()) {
    cairn::service::ServerOptions so;
    so.models_options.builtin = cairn::service::DemoModelCatalog();
    so.listen = "127.0.0.1:0";
    so.models_options.threads = o.threads;
    so.models_options.checkpoint = o.checkpoint;
    for (const auto& s : o.serve) so.models.push_back(*cairn::service::ParseModelSpec(s));
    // Its own figures are the output: no access-log line per request.
    cairn::service::SetLogLevel(cairn::service::LogLevel::kWarning);
    auto s = cairn::service::Server::Create(so);
    if (!s.ok()) {
      std::fprintf(stderr, "cairn-load: %s\n", s.status().ToString().c_str());
      return 1;
    }
    server = std::move(*s);
    addr = "127.0.0.1:" + std::to_string(server->port());
  }
  int rc = 0;
  if (o.batching_gain) {
    // Decode-dominated requests: short prompts, long replies. The machine's
    // speed drifts (shared hosts), so the two phases alternate over several
    // rounds and each round gives its own ratio; the median is the figure.
    Options d = o;
    d.prompt_tokens = 8;
    d.max_tokens = std::max(o.max_tokens, 128);
    std::vector<double> gains, decode_gains;
    int64_t errors = 0;
    for (int round = 0; round < o.rounds; ++round) {
      const RunResult one = Run(addr, d, 1, o.seconds / o.rounds);
      Print("single", 1, one);
      const RunResult eight = Run(addr, d, 8, o.seconds / o.rounds);
      Print("batched", 8, eight);
      gains.push_back((eight.tokens / eight.seconds) / (one.tokens / one.seconds));
      // Decode alone: each stream's own decode rate (the server's timings,
      // prompt and request turnaround excluded), summed over the streams.
      decode_gains.push_back(8 * eight.decode_rate / std::max(one.decode_rate, 1e-9));
      std::printf(
          "round %d: batching gain %.2fx (aggregate tokens/s), %.2fx (aggregate decode tokens/s: "
          "1 stream %.1f, 8 streams %.1f each)\n",
          round + 1, gains.back(), decode_gains.back(), one.decode_rate, eight.decode_rate);
      errors += one.errors + eight.errors;
    }
    std::printf("batching gain (8 concurrent vs 1, aggregate tokens/s), median of %d rounds: %.2fx\n", o.rounds,
                Percentile(gains, 0.5));
    std::printf("batching gain (8 concurrent vs 1, aggregate decode tokens/s), median of %d rounds: %.2fx\n", o.rounds,
                Percentile(decode_gains, 0.5));
    rc = errors == 0 ? 0 : 1;
  } else {
    const RunResult r = Run(addr, o, o.clients, o.seconds);
    Print("load", o.clients, r);
    rc = r.errors == 0 ? 0 : 1;
  }
  if (server != nullptr) {
    std::printf("server metrics:\n");
    const std::string m = server->metrics().Render();
    for (const char* key : {"cairn_requests_ok_total ", "cairn_requests_failed_total ", "cairn_generated_tokens_total ",
                            "cairn_decode_batch_rows_sum ", "cairn_decode_batch_rows_count "}) {
      const size_t at = m.find(std::string("\n") + key);
      if (at != std::string::npos) std::printf("  %s\n", m.substr(at + 1, m.find('\n', at + 1) - at - 1).c_str());
    }
  }
  return rc;
}
