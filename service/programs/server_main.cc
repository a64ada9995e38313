// cairn-server: serves models over gRPC (see README "Run").
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/memory.h"
#include "checkpoint/options.h"
#include "service/host/log.h"
#include "service/host/memory_budget.h"
#include "service/programs/demo_catalog.h"
#include "service/programs/demo_models.h"
#include "service/server.h"
#include "service/sessions/snapshot_seal.h"

namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const char c = static_cast<char>(sig);
  if (write(g_signal_pipe[1], &c, 1) < 0) {
  }
}

const char kUsage[] = R"(cairn-server: a gRPC inference service (cairn.v1.Inference)

  --listen=HOST:PORT        address to serve on (default 127.0.0.1:50051; port 0: any)
  --model=NAME=PATH[:FAMILY]
                            serve a GGUF model under NAME (repeatable); the family
                            comes from general.architecture unless given. PATH may be
                            a built-in synthetic model: %s.
                            Without --model: every built-in synthetic model (random
                            weights: their text is meaningless).
  --backend-plugin=PATH     load a backend family from its plugin library
                            (libcairn_<family>_plugin.so; repeatable); the server
                            refuses to start if one cannot be loaded
  --threads=N               compute threads per model (default: all cores)
  --exact-activations       keep activations in F32 in every weight product (logits
                            match the exact-math golden files to 1e-4 x std); default:
                            quantized weights (Q8_0, Q4_0, K-quants) take 8-bit
                            activations and integer dot products, like llama.cpp
                            (2-3x faster prompts); F32/F16 models are exact either way
  --max-context=N           cap the context length (default: the model's)
  --max-batch=N             sequences decoding together per model (default 64)
  --shutdown-grace=N        on SIGTERM/SIGINT: stop accepting, give running calls N
                            seconds to finish, then cancel them (default 5)
  --shutdown-persist-seconds=N  then write checkpoints to the disk tier for at most N
                            seconds, the most valuable first (default 5)
  --stalled-stream-seconds=N  a Generate whose client stopped reading pauses once 32
                            tokens are unwritten, and ends (CANCELLED) after N seconds
                            without a completed write (default 30)
  --max-queue=N             requests waiting per model (default 256)
  --max-concurrent=N        concurrent Generate calls (default 256)
  --max-sessions=N          live sessions (default 1024)
  --memory-budget=SIZE|N%%   bytes of live sequence memory (KV caches, recurrent state)
                            of all sessions and running requests together, e.g. 8GiB
                            or 25%% of the RAM (default 50%%; 0: unlimited). A request,
                            session create, fork or import that would exceed it gets
                            RESOURCE_EXHAUSTED and changes nothing.
  --session-idle-seconds=N  delete sessions idle this long (default 3600)
  --metrics-listen=HOST:PORT  Prometheus /metrics over HTTP (GET/HEAD /metrics; default: off)
  --log-level=LEVEL         error, warning, info (default: also one access-log line per
                            request on stderr) or debug
  --tls-cert=PEM --tls-key=PEM  serve TLS with this certificate chain and key
  --tls-client-ca=PEM       require client certificates signed by this CA (mutual TLS)
  --auth-token-file=PATH    require 'authorization: Bearer <token>' with a token from
                            this file (one per line); sessions belong to their token
  --share-prefix-cache      let different tokens share the prefix cache (off: cache
                            timing could reveal another tenant's prompts)
  --replica-name=NAME       sent as 'x-cairn-replica' metadata on every response
                            (default: the host name; '' : none)
  --session-dir=PATH        a directory replicas share: every session is written there
                            with its id after each request that changes it, and a
                            session this replica does not hold is read from there, so
                            it continues here when its replica went away (files older
                            than --session-idle-seconds are deleted)
  --snapshot-key=FILE       a secret (>= 16 bytes) the replicas share: session exports
                            and session-directory files are signed with it, and only
                            state signed with it may serve other sessions through the
                            shared prefix cache (without it, imported and restored
                            state serves only its own session and its forks)
%s)";

bool Flag(const std::string& arg, const std::string& name, std::string* value) {
  const std::string p = "--" + name + "=";
  if (arg.rfind(p, 0) != 0) return false;
  *value = arg.substr(p.size());
  return true;
}

template <typename T>
bool ParseInt(const std::string& flag, const std::string& v, T* out) {
  int64_t x;
  if (!absl::SimpleAtoi(v, &x) || x < 0) {
    std::fprintf(stderr, "cairn-server: bad value for --%s: '%s'\n", flag.c_str(), v.c_str());
    return false;
  }
  *out = static_cast<T>(x);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  KeepFreedSnapshotMemory();
  std::vector<std::string> args(argv + 1, argv + argc);
  service::ServerOptions opt;
  opt.models_options.builtin = service::DemoModelCatalog();
  if (absl::Status st = checkpoint::ParseCheckpointFlags(&args, &opt.models_options.checkpoint); !st.ok()) {
    std::fprintf(stderr, "cairn-server: %s\n", st.ToString().c_str());
    return 2;
  }
  std::string memory_budget = "50%";
  bool replica_name_given = false;
  std::string demo_names;
  for (const auto& n : service::DemoModelNames()) demo_names += (demo_names.empty() ? "" : ", ") + n;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], v;
    // Accept "--flag value" as well as "--flag=value".
    if (a.rfind("--", 0) == 0 && a.find('=') == std::string::npos && a != "--help" &&
        a != "--share-prefix-cache" && a != "--exact-activations" && i + 1 < args.size()) {
      a += "=" + args[++i];
    }
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::printf(kUsage, demo_names.c_str(), checkpoint::CheckpointFlagsHelp().c_str());
      return 0;
    } else if (Flag(a, "listen", &v)) {
      opt.listen = v;
    } else if (Flag(a, "model", &v)) {
      auto spec = service::ParseModelSpec(v);
      if (!spec.ok()) {
        std::fprintf(stderr, "cairn-server: %s\n", spec.status().ToString().c_str());
        return 2;
      }
      opt.models.push_back(*spec);
    } else if (Flag(a, "backend-plugin", &v)) {
      opt.models_options.backend_plugins.push_back(v);
    } else if (Flag(a, "threads", &v)) {
      ok = ParseInt("threads", v, &opt.models_options.threads);
    } else if (Flag(a, "max-context", &v)) {
      ok = ParseInt("max-context", v, &opt.models_options.max_context);
    } else if (Flag(a, "shutdown-grace", &v)) {
      int32_t seconds = 0;
      ok = ParseInt("shutdown-grace", v, &seconds);
      opt.shutdown_grace = std::chrono::seconds(seconds);
    } else if (Flag(a, "shutdown-persist-seconds", &v)) {
      int32_t seconds = 0;
      ok = ParseInt("shutdown-persist-seconds", v, &seconds);
      opt.shutdown_persist = std::chrono::seconds(seconds);
    } else if (Flag(a, "stalled-stream-seconds", &v)) {
      int32_t seconds = 0;
      ok = ParseInt("stalled-stream-seconds", v, &seconds);
      if (ok && seconds <= 0) {
        std::fprintf(stderr, "cairn-server: --stalled-stream-seconds must be > 0\n");
        ok = false;
      }
      opt.scheduler.stalled_stream = std::chrono::seconds(seconds);
    } else if (Flag(a, "max-batch", &v)) {
      ok = ParseInt("max-batch", v, &opt.scheduler.max_batch);
    } else if (Flag(a, "max-queue", &v)) {
      ok = ParseInt("max-queue", v, &opt.scheduler.max_queue);
    } else if (Flag(a, "max-concurrent", &v)) {
      ok = ParseInt("max-concurrent", v, &opt.limits.max_concurrent_generate);
    } else if (Flag(a, "memory-budget", &v)) {
      memory_budget = v;
    } else if (Flag(a, "max-sessions", &v)) {
      ok = ParseInt("max-sessions", v, &opt.sessions.max_sessions);
    } else if (Flag(a, "session-idle-seconds", &v)) {
      int64_t s = 0;
      ok = ParseInt("session-idle-seconds", v, &s);
      opt.sessions.idle_timeout = std::chrono::seconds(s);
    } else if (Flag(a, "metrics-listen", &v)) {
      opt.metrics_listen = v;
    } else if (Flag(a, "log-level", &v)) {
      auto level = service::ParseLogLevel(v);
      if (!level.ok()) {
        std::fprintf(stderr, "cairn-server: --log-level: %s\n", level.status().ToString().c_str());
        return 2;
      }
      service::SetLogLevel(*level);
    } else if (Flag(a, "tls-cert", &v)) {
      opt.tls_cert = v;
    } else if (Flag(a, "tls-key", &v)) {
      opt.tls_key = v;
    } else if (Flag(a, "tls-client-ca", &v)) {
      opt.tls_client_ca = v;
    } else if (Flag(a, "auth-token-file", &v)) {
      auto tokens = service::Authenticator::ReadTokenFile(v);
      if (!tokens.ok()) {
        std::fprintf(stderr, "cairn-server: %s\n", tokens.status().ToString().c_str());
        return 2;
      }
      opt.auth_tokens = *tokens;
    } else if (Flag(a, "replica-name", &v)) {
      opt.replica_name = v;
      replica_name_given = true;
    } else if (Flag(a, "session-dir", &v)) {
      if (v.empty()) {
        std::fprintf(stderr, "cairn-server: --session-dir needs a path\n");
        return 2;
      }
      opt.session_dir = v;
    } else if (Flag(a, "snapshot-key", &v)) {
      auto key = service::ReadSnapshotKey(v);
      if (!key.ok()) {
        std::fprintf(stderr, "cairn-server: --snapshot-key: %s\n", key.status().ToString().c_str());
        return 2;
      }
      opt.snapshot_key = *key;
    } else if (a == "--share-prefix-cache") {
      opt.share_prefix_cache = true;
    } else if (a == "--exact-activations") {
      opt.models_options.exact_activations = true;
    } else {
      std::fprintf(stderr, "cairn-server: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
    if (!ok) return 2;
  }

  if (!replica_name_given) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) opt.replica_name = host;
  }
  {
    auto budget = service::ParseMemoryBudget(memory_budget);
    if (!budget.ok()) {
      std::fprintf(stderr, "cairn-server: --memory-budget: %s\n", budget.status().ToString().c_str());
      return 2;
    }
    opt.memory_budget_bytes = *budget;
  }

  // SIGINT/SIGTERM end the server cleanly. A handler (not a blocked mask and
  // sigwait) because library threads may run with their own masks: whichever
  // thread takes the signal, the handler only writes to a pipe that one
  // thread here reads.
  if (pipe(g_signal_pipe) != 0) {
    std::perror("cairn-server: pipe");
    return 1;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto server = service::Server::Create(opt);
  if (!server.ok()) {
    std::fprintf(stderr, "cairn-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  for (service::ServedModel* m : (*server)->models().All()) {
    std::fprintf(stderr, "cairn-server: model %s (%s, %s%s), context %d, sequence memory %zu + %zu bytes/position\n",
                 m->name.c_str(), m->info().arch.c_str(), m->info().family.c_str(),
                 m->synthetic ? ", synthetic: random weights" : "", m->context_length(),
                 m->sequence_base_bytes, m->sequence_bytes_per_position);
  }
  if (opt.memory_budget_bytes > 0) {
    std::fprintf(stderr, "cairn-server: memory budget for live sequences: %zu bytes (%.1f MiB; --memory-budget=%s)\n",
                 opt.memory_budget_bytes, static_cast<double>(opt.memory_budget_bytes) / (1 << 20),
                 memory_budget.c_str());
  } else {
    std::fprintf(stderr, "cairn-server: memory budget for live sequences: unlimited\n");
  }
  if (!opt.session_dir.empty()) {
    std::fprintf(stderr, "cairn-server: sessions persisted in %s\n", opt.session_dir.c_str());
  }
  std::fprintf(stderr, "cairn-server: listening on port %d\n", (*server)->port());
  if ((*server)->metrics().port() != 0) {
    std::fprintf(stderr, "cairn-server: metrics on port %d\n", (*server)->metrics().port());
  }
  std::thread signals([&] {
    char c = 0;
    while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    if (c != 0) std::fprintf(stderr, "cairn-server: signal %d, shutting down\n", c);
    (*server)->Shutdown();
  });
  (*server)->Wait();
  // Wake the signal thread if Shutdown came from elsewhere.
  const char zero = 0;
  if (write(g_signal_pipe[1], &zero, 1) < 0) {
  }
  signals.join();
  server->reset();
  return 0;
}
