// cairn-server: serves models over gRPC (see README "Run").
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backends/memory.h"
#include "checkpoint/options.h"
#include "service/host/log.h"
#include "service/host/memory_budget.h"
#include "service/programs/demo_catalog.h"
#include "service/programs/demo_models.h"
#include "service/programs/flags.h"
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
                            a built-in synthetic model: {demo models}.
                            Without --model: every built-in synthetic model (random
                            weights: their text is meaningless).
  --chat-template=NAME=FILE render model NAME's chat messages with the Jinja
                            template in FILE instead of its GGUF's
                            tokenizer.chat_template (repeatable, one per model)
  --backend-plugin=PATH     load a backend family from its plugin library
                            (libcairn_<family>_plugin.so; repeatable); the server
                            refuses to start if one cannot be loaded
  --threads=N               compute threads per model (default or 0: the CPUs the
                            process may use: its CPU affinity, lowered to the cgroup's
                            CPU quota, ceil(quota/period) of cpu.max; logged at start)
  --cgroup-root=DIR         where cgroup v2 is mounted, for the CPU quota (default
                            /sys/fs/cgroup)
  --exact-activations       keep activations in F32 in every weight product (logits
                            match the exact-math golden files to 1e-4 x std); default:
                            quantized weights (Q8_0, Q4_0, K-quants) take 8-bit
                            activations and integer dot products, like llama.cpp
                            (2-3x faster prompts); F32/F16 models are exact either way
  --no-pack-weights         keep quantized weights in the file's rows instead of
                            repacking them at load for the CPU's integer kernels
                            (same results; packed decodes faster on AVX2)
  --max-context=N           cap the context length (default: the model's)
  --max-batch=N             sequences decoding together per model (default 64)
  --decode-step-tokens=N    at most N prompt tokens per step while other sequences
                            decode: shorter stalls between their tokens, later first
                            tokens (default 0: the whole --prefill-chunk)
  --shutdown-grace=N        on SIGTERM/SIGINT: stop accepting, give running calls N
                            seconds to finish, then cancel them (default 5)
  --shutdown-persist-seconds=N  then write checkpoints to the disk tier for at most N
                            seconds, the most valuable first (default 5)
  --stalled-stream-seconds=N  a Generate whose client stopped reading pauses once 32
                            tokens are unwritten, and ends (CANCELLED) after N seconds
                            without a completed write (default 30)
  --max-queue=N             requests waiting per model (default 256)
  --max-concurrent=N        concurrent Generate calls (default 256)
  --max-tokens-default=N    tokens a Generate produces when it sets no max_tokens
                            (default 256)
  --max-tokens-limit=N      the most tokens one Generate produces: a larger max_tokens
                            is capped (default 16384). Also the bound on tokens
                            generated ahead of a client that stopped reading.
  --max-sessions=N          live sessions (default 1024)
  --memory-budget=SIZE|N%   bytes of live sequence memory (KV caches, recurrent state)
                            of all sessions and running requests together, e.g. 8GiB
                            or 25% of the RAM (default 50%; 0: unlimited). A request,
                            session create, fork or import that would exceed it gets
                            RESOURCE_EXHAUSTED and changes nothing.
  --session-idle-seconds=N  delete sessions idle this long (default 3600)
  --metrics-listen=HOST:PORT  Prometheus /metrics over HTTP (GET/HEAD /metrics; default: off)
  --http-listen=HOST:PORT   the OpenAI-compatible HTTP API (/v1/chat/completions,
                            /v1/completions, /v1/models, /health; HTTPS with --tls-*,
                            the same tokens and limits as gRPC; default: off)
  --http-timeout-ms=N       the deadline of an HTTP completion whose request sets none
                            (header X-Cairn-Timeout-Ms), as a gRPC deadline: it bounds
                            the wait for a busy session and the generation (504 when
                            it passes; default 0: none)
  --log-level=LEVEL         error, warning, info (default: also one access-log line per
                            request on stderr) or debug
  --tls-cert=PEM --tls-key=PEM  serve TLS with this certificate chain and key
  --tls-client-ca=PEM       require client certificates signed by this CA (mutual TLS)
  --auth-token-file=PATH    require 'authorization: Bearer <token>' with a token from
                            this file (one per line); sessions belong to their token
  --credentials-refresh-seconds=N  check the TLS files and the token file for
                            changes every N seconds (default 5): a rotated
                            certificate, client CA or token file takes effect
                            without a restart; open connections and streams go on
  --share-prefix-cache      let different tokens share the prefix cache (off: cache
                            timing could reveal another tenant's prompts)
  --replica-name=NAME       sent as 'x-cairn-replica' metadata on every response
                            (default: the host name; '' : none)
  --session-dir=PATH        a directory replicas share: every session is written there
                            with its id after each request that changes it, and a
                            session this replica does not hold is read from there, so
                            it continues here when its replica went away (files older
                            than --session-idle-seconds are deleted; so is a session's file
                            when its latest state could not be written)
  --snapshot-key=FILE       a secret (>= 16 bytes) the replicas share: session exports
                            and session-directory files are signed with it, and only
                            state signed with it may serve other sessions through the
                            shared prefix cache (without it, imported and restored
                            state serves only its own session and its forks)
{checkpoint flags})";

// The flags' values that ServerOptions does not take as they are
// (FinishOptions turns them into options).
struct ServerFlags {
  std::string memory_budget = "50%";
  std::string replica_name;
  bool replica_name_given = false;
  std::string auth_token_file;
  std::string snapshot_key_file;
  std::string log_level;
  std::vector<std::string> models;
  int32_t credentials_refresh = 5;
  std::vector<std::string> chat_templates;  // NAME=FILE
  int32_t shutdown_grace = 5;
  int32_t shutdown_persist = 5;
  int32_t stalled_stream = 30;
  int64_t session_idle = 3600;
  bool no_pack_weights = false;
};

// Every flag of cairn-server, into `opt` or `f`.
void DeclareFlags(cairn::service::FlagParser& flags, ServerFlags& f, cairn::service::ServerOptions& opt) {
  flags.Delegate([&opt](std::string_view arg) {
    return cairn::checkpoint::ApplyCheckpointFlag(arg, &opt.models_options.checkpoint);
  });
  flags.Add("listen", &opt.listen);
  flags.Add("model", &f.models);
  flags.Add("chat-template", &f.chat_templates);
  flags.Add("backend-plugin", &opt.models_options.backend_plugins);
  flags.Add("threads", &opt.models_options.threads, 0);
  flags.Add("cgroup-root", &opt.cgroup_root);
  flags.Add("max-context", &opt.models_options.max_context, 0);
  flags.Add("shutdown-grace", &f.shutdown_grace, 0);
  flags.Add("shutdown-persist-seconds", &f.shutdown_persist, 0);
  flags.Add("stalled-stream-seconds", &f.stalled_stream, 1);
  flags.Add("max-batch", &opt.scheduler.max_batch, 0);
  flags.Add("decode-step-tokens", &opt.scheduler.decode_step_tokens, 0);
  flags.Add("max-queue", &opt.scheduler.max_queue, 0);
  flags.Add("max-concurrent", &opt.limits.max_concurrent_generate, 0);
  flags.Add("max-tokens-default", &opt.limits.default_max_tokens, 0);
  flags.Add("max-tokens-limit", &opt.limits.max_tokens_limit, 1);
  flags.Add("memory-budget", &f.memory_budget);
  flags.Add("max-sessions", &opt.sessions.max_sessions, 0);
  flags.Add("session-idle-seconds", &f.session_idle, 0);
  flags.Add("metrics-listen", &opt.metrics_listen);
  flags.Add("http-listen", &opt.http.listen);
  flags.Add("http-timeout-ms", [&opt](const std::string& v) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(v, &ms) || ms < 0 || ms > cairn::service::http::HttpOptions::kMaxTimeoutMs) {
      return absl::InvalidArgumentError(absl::StrCat("a whole number of milliseconds from 0 (none) to ",
                                                     cairn::service::http::HttpOptions::kMaxTimeoutMs,
                                                     " (a day) is needed"));
    }
    opt.http.default_timeout = std::chrono::milliseconds(ms);
    return absl::OkStatus();
  });
  flags.Add("log-level", &f.log_level);
  flags.Add("tls-cert", &opt.tls_cert);
  flags.Add("tls-key", &opt.tls_key);
  flags.Add("tls-client-ca", &opt.tls_client_ca);
  flags.Add("auth-token-file", &f.auth_token_file);
  flags.Add("credentials-refresh-seconds", &f.credentials_refresh, 1);
  flags.Add("replica-name", [&f](const std::string& v) {
    f.replica_name = v;
    f.replica_name_given = true;
    return absl::OkStatus();
  });
  flags.Add("session-dir", [&opt](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError("a path is needed");
    opt.session_dir = v;
    return absl::OkStatus();
  });
  flags.Add("snapshot-key", &f.snapshot_key_file);
  flags.Switch("share-prefix-cache", &opt.share_prefix_cache);
  flags.Switch("exact-activations", &opt.models_options.exact_activations);
  flags.Switch("no-pack-weights", &f.no_pack_weights);
}

// `status` with the flag named first.
absl::Status Prefixed(const char* flag, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(flag, ": ", status.message()));
}

// What the flags name beyond a value: files read, sizes and levels parsed,
// the host name. The error names the flag.
absl::Status FinishOptions(const ServerFlags& f, cairn::service::ServerOptions& opt) {
  using namespace cairn;
  opt.models_options.pack_weights = !f.no_pack_weights;
  for (const std::string& m : f.models) {
    auto spec = service::ParseModelSpec(m);
    if (!spec.ok()) return spec.status();
    opt.models.push_back(*spec);
  }
  for (const std::string& t : f.chat_templates) {
    const size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template: expected NAME=FILE, got '", t, "'"));
    }
    if (!opt.models_options.chat_template_files.emplace(t.substr(0, eq), t.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template: model '", t.substr(0, eq), "' given twice"));
    }
  }
  opt.shutdown_grace = std::chrono::seconds(f.shutdown_grace);
  opt.shutdown_persist = std::chrono::seconds(f.shutdown_persist);
  opt.scheduler.stalled_stream = std::chrono::seconds(f.stalled_stream);
  opt.sessions.idle_timeout = std::chrono::seconds(f.session_idle);
  if (!f.log_level.empty()) {
    auto level = service::ParseLogLevel(f.log_level);
    if (!level.ok()) return Prefixed("--log-level", level.status());
    service::SetLogLevel(*level);
  }
  if (!f.auth_token_file.empty()) {
    // Read here too, so that a bad file stops the start before the models load.
    auto tokens = service::Authenticator::ReadTokenFile(f.auth_token_file);
    if (!tokens.ok()) return Prefixed("--auth-token-file", tokens.status());
    opt.auth_token_file = f.auth_token_file;
  }
  opt.credentials_refresh = std::chrono::seconds(f.credentials_refresh);
  if (!f.snapshot_key_file.empty()) {
    auto key = service::ReadSnapshotKey(f.snapshot_key_file);
    if (!key.ok()) return Prefixed("--snapshot-key", key.status());
    opt.snapshot_key = *key;
  }
  opt.replica_name = f.replica_name;
  if (!f.replica_name_given) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) opt.replica_name = host;
  }
  auto budget = service::ParseMemoryBudget(f.memory_budget, opt.cgroup_root);
  if (!budget.ok()) return Prefixed("--memory-budget", budget.status());
  opt.memory_budget_bytes = *budget;
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  KeepFreedSnapshotMemory();
  service::ServerOptions opt;
  opt.models_options.builtin = service::DemoModelCatalog();
  std::string demo_names;
  for (const auto& n : service::DemoModelNames()) demo_names += (demo_names.empty() ? "" : ", ") + n;
  const std::string usage = absl::StrReplaceAll(
      kUsage, {{"{demo models}", demo_names}, {"{checkpoint flags}", checkpoint::CheckpointFlagsHelp()}});
  service::FlagParser flags("cairn-server");
  ServerFlags f;
  DeclareFlags(flags, f, opt);
  if (auto outcome = flags.Parse(argc, argv, usage); outcome != service::FlagParser::Outcome::kRun) {
    return service::FlagParser::ExitCode(outcome);
  }
  if (absl::Status st = FinishOptions(f, opt); !st.ok()) {
    std::fprintf(stderr, "cairn-server: %s\n", st.ToString().c_str());
    return 2;
  }
  const std::string& memory_budget = f.memory_budget;

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
                 m->synthetic ? ", synthetic: random weights" : "", m->context_length(), m->sequence_base_bytes,
                 m->sequence_bytes_per_position);
    if (m->chat_template.has_value()) {
      std::fprintf(stderr, "cairn-server: model %s chat template %s\n", m->name.c_str(),
                   m->chat_template->description().c_str());
    }
  }
  std::fprintf(stderr, "cairn-server: compute threads per model: %d (%s)\n", (*server)->compute_threads().threads,
               (*server)->compute_threads().source.c_str());
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
  if ((*server)->http_port() != 0) {
    std::fprintf(stderr, "cairn-server: OpenAI-compatible HTTP API on port %d\n", (*server)->http_port());
  }
  if ((*server)->metrics().port() != 0) {
    std::fprintf(stderr, "cairn-server: metrics on port %d\n", (*server)->metrics().port());
  }
  std::thread signals([&] {
    char c = 0;
    while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    if (c != 0) {
      std::fprintf(stderr, "cairn-server: signal %d, shutting down: running calls get up to %d s (--shutdown-grace)\n",
                   c, f.shutdown_grace);
    }
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
