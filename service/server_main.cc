// cairn-server: serves models over gRPC (see README "Run").
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/options.h"
#include "service/demo_models.h"
#include "service/server.h"

namespace {

const char kUsage[] = R"(cairn-server: a gRPC inference service (cairn.v1.Inference)

  --listen=HOST:PORT        address to serve on (default 127.0.0.1:50051; port 0: any)
  --model=NAME=PATH[:FAMILY]
                            serve a GGUF model under NAME (repeatable); the family
                            comes from general.architecture unless given. PATH may be
                            a built-in synthetic model: %s.
                            Without --model: every built-in synthetic model (random
                            weights: their text is meaningless).
  --threads=N               compute threads per model (default: all cores)
  --max-context=N           cap the context length (default: the model's)
  --max-batch=N             sequences decoding together per model (default 64)
  --max-queue=N             requests waiting per model (default 256)
  --max-concurrent=N        concurrent Generate calls (default 256)
  --max-sessions=N          live sessions (default 1024)
  --session-idle-seconds=N  delete sessions idle this long (default 3600)
  --metrics-listen=HOST:PORT  Prometheus /metrics over HTTP (default: off)
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
  std::vector<std::string> args(argv + 1, argv + argc);
  service::ServerOptions opt;
  if (absl::Status st = checkpoint::ParseCheckpointFlags(&args, &opt.models_options.checkpoint); !st.ok()) {
    std::fprintf(stderr, "cairn-server: %s\n", st.ToString().c_str());
    return 2;
  }
  std::string demo_names;
  for (const auto& n : service::DemoModelNames()) demo_names += (demo_names.empty() ? "" : ", ") + n;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], v;
    // Accept "--flag value" as well as "--flag=value".
    if (a.rfind("--", 0) == 0 && a.find('=') == std::string::npos && a != "--help" && i + 1 < args.size()) {
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
    } else if (Flag(a, "threads", &v)) {
      ok = ParseInt("threads", v, &opt.models_options.threads);
    } else if (Flag(a, "max-context", &v)) {
      ok = ParseInt("max-context", v, &opt.models_options.max_context);
    } else if (Flag(a, "max-batch", &v)) {
      ok = ParseInt("max-batch", v, &opt.scheduler.max_batch);
    } else if (Flag(a, "max-queue", &v)) {
      ok = ParseInt("max-queue", v, &opt.scheduler.max_queue);
    } else if (Flag(a, "max-concurrent", &v)) {
      ok = ParseInt("max-concurrent", v, &opt.limits.max_concurrent_generate);
    } else if (Flag(a, "max-sessions", &v)) {
      ok = ParseInt("max-sessions", v, &opt.sessions.max_sessions);
    } else if (Flag(a, "session-idle-seconds", &v)) {
      int64_t s = 0;
      ok = ParseInt("session-idle-seconds", v, &s);
      opt.sessions.idle_timeout = std::chrono::seconds(s);
    } else if (Flag(a, "metrics-listen", &v)) {
      opt.metrics_listen = v;
    } else {
      std::fprintf(stderr, "cairn-server: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
    if (!ok) return 2;
  }

  // SIGINT/SIGTERM end the server cleanly: block them here (every thread
  // inherits the mask) and wait for them on one thread.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto server = service::Server::Create(opt);
  if (!server.ok()) {
    std::fprintf(stderr, "cairn-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  for (service::ServedModel* m : (*server)->models().All()) {
    std::fprintf(stderr, "cairn-server: model %s (%s, %s%s), context %d\n", m->name.c_str(),
                 m->info().arch.c_str(), m->info().family.c_str(),
                 m->synthetic ? ", synthetic: random weights" : "", m->context_length());
  }
  std::fprintf(stderr, "cairn-server: listening on port %d\n", (*server)->port());
  if ((*server)->metrics().port() != 0) {
    std::fprintf(stderr, "cairn-server: metrics on port %d\n", (*server)->metrics().port());
  }
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "cairn-server: signal %d, shutting down\n", sig);
    (*server)->Shutdown();
  });
  (*server)->Wait();
  // Wake the signal thread if Shutdown came from elsewhere.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  server->reset();
  return 0;
}
