// bench/multiturn: prompt reuse of cairn on chat scenarios, per model family,
// against the least any cache could do, and time to first token with
// checkpointing on vs off (the baseline), both measured in this run.
//
// By default it drives cairn through its gRPC API over a real local socket:
// two cairn servers started in this process (service::Server on 127.0.0.1,
// a free port each) serve the same model, one with checkpointing on (the
// default checkpoint options or the flags given) and one with checkpoints off.
// Every scenario runs on a fresh pair of servers (empty caches, a fresh
// checkpoint store), with the same seeded structure on both; each server's
// conversation carries the replies that server generated (greedy by default,
// --temperature samples with a seed per request shared by both servers;
// exactly 48 tokens: max_tokens 48, ignore_eos). Sessions are
// created with SessionControl; every Generate sends the whole conversation
// (system prompt and messages as token parts, each followed by a message
// boundary) on its session. Requests alternate which server goes first, so
// both see the same machine load. --in-process drives the checkpoint engine
// directly instead (Prefill/Decode/EndGeneration, replies drawn from the
// seeded generator), as this benchmark did before the service existed.
//
// Scenarios (seeded random token conversations: a 300-token system prompt,
// 40-120-token user messages, 48-token replies):
//   append      each turn extends the last
//   regenerate  each reply is generated twice from the same prompt
//   edit        the last user message is edited (second half replaced)
//   dropthink   every previous reply is re-sent without its first third
//   branch      back two turns, two new turns, then return to the main line
//   interleave  two conversations alternating (a session each)
//   manyusers   8 conversations sharing the system prompt, round robin
//   trim        plain token prompts, no message boundaries, user messages
//               of 130-250 tokens (tool results: longer than the 128-position
//               tail span, whose points would otherwise reach back to the
//               system prompt's end); after 3 turns each request drops the
//               oldest user+reply turn right after the unmarked system prompt
//   cancel      over gRPC only: the client cancels every reply after k
//               tokens (2..40, seeded) and continues with exactly what it
//               saw: a conversation on a session and one sessionless,
//               alternating (a cancelled turn leaves the session as it was;
//               the whole conversation is sent either way)
//   agent       over gRPC only: a tool-using agent sent as chat messages,
//               rendered by Qwen3.5's template from ../shared (its reasoning
//               of earlier turns dropped after each new user turn); --turns
//               user turns of three requests each (multiturn_agent.h)
// "minimum" is, per server, the part of each prompt that no earlier request
// on that server computed (prompts and generated tokens; over gRPC the last
// token of a reply is sampled but never run through the model, so the next
// prompt must compute it; likewise the last token a cancelling client
// read); ratio = recomputed / minimum over a scenario.
// Greedy replies of tiny models are often one token repeated: such a reply
// re-sent without its first third (dropthink) is a prefix of the computed
// one, so the minimum counts it as computed although only a state inside the
// earlier reply could serve it; the output counts these periodic replies.
// TTFT over gRPC is the server's Timings.time_to_first_token_seconds (request
// received to first token, including queueing and the first sampling); the
// client's send-to-first-token-read is shown beside it. In process it is the
// Prefill call (restore + forward + captures).
//
// Models: the golden models of each family (tiny: ratios) and, with
// --synthetic, bigger synthetic llama and mamba2 models and the service's
// built-in demo-hybrid-large where compute dominates (TTFT). Also reports
// the checkpointing cost on a long prompt (always in process, through the
// engine).
//
//   multiturn [--in-process] [--synthetic] [--only-synthetic] [--model NAME=PATH]...
//             [--turns 6] [--seed 1] [--threads 1] [--temperature 0]
//             [--scenarios append,branch,...|none] [--max-ratio R] [checkpoint flags]
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "backends/model/gguf.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "bench/multiturn_agent.h"
#include "bench/multiturn_drivers.h"
#include "bench/multiturn_overhead.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "checkpoint/engine.h"
#include "checkpoint/options.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "service/programs/demo_models.h"
#include "service/server.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

using bench::Clock;
using bench::Conv;
using bench::Die;
using bench::Driver;
using bench::kReply;
using bench::Msg;
using bench::Msgs;
using bench::Same;
using bench::Since;
using bench::Totals;
using checkpoint::CheckpointEngine;
using checkpoint::CheckpointOptions;
using checkpoint::CheckpointStore;
using checkpoint::Prompt;
using checkpoint::Sequence;
using checkpoint::SymbolKey;

// ---- synthetic models (random weights, realistic ratios of shapes) ----
//
// Served from temporary files. (The service's demo models have other shapes
// and their own vocabulary: demo-hybrid-large is served by name.)

std::vector<uint8_t> SerializeOrDie(const synthetic::SyntheticModel& model, const std::string& name) {
  absl::StatusOr<std::vector<uint8_t>> bytes = model.Serialize();
  if (!bytes.ok()) Die(name, bytes.status());
  return *std::move(bytes);
}

std::vector<uint8_t> SyntheticLlama() {
  return SerializeOrDie(synthetic::Llama({.n_embd = 768,
                                          .n_ff = 2048,
                                          .n_vocab = 8192,
                                          .n_layer = 8,
                                          .n_head = 12,
                                          .n_head_kv = 4,
                                          .n_ctx = 8192,
                                          .rope_base = 500000.0f}),
                        "synthetic-llama");
}

std::vector<uint8_t> SyntheticMamba2() {
  return SerializeOrDie(synthetic::Mamba2({.n_embd = 768, .n_vocab = 8192, .d_state = 64, .n_head = 24, .n_layer = 12}),
                        "synthetic-mamba2");
}

// A client that sends plain token prompts (no boundaries) and keeps its
// conversation short: once it holds 3 turns, each request drops the oldest
// user message and reply, right after the system prompt. The first trim
// diverges at the end of the unmarked system prompt, inside the first prompt
// and, with user messages longer than the tail span, before its tail points.
void RunTrim(Driver& d, Conv& c, int turns) {
  c.marked = false;
  const int s = d.NewSession();
  Msgs m;
  for (int t = 0; t < turns; ++t) {
    if (m.size() >= 6) m.erase(m.begin(), m.begin() + 2);
    m.push_back(Same(c.Tokens(130 + static_cast<int>((*c.rng)() % 121))));
    m.push_back(d.Turn(s, c, m));
  }
  c.marked = true;
}

void RunScenario(const std::string& name, Driver& d, Conv& c, int turns) {
  if (name == "trim") {
    RunTrim(d, c, turns);
  } else if (name == "append") {
    const int s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      m.push_back(d.Turn(s, c, m));
    }
  } else if (name == "regenerate") {
    const int s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      d.Turn(s, c, m);
      m.push_back(d.Turn(s, c, m));  // regenerate
    }
  } else if (name == "edit") {
    const int s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      d.Turn(s, c, m);
      Msg& u = m.back();  // edit: second half replaced (the same on both sides)
      const size_t half = u.t[0].size() / 2;
      auto tail = c.Tokens(static_cast<int>(u.t[0].size() - half));
      for (auto& side : u.t) std::copy(tail.begin(), tail.end(), side.begin() + half);
      m.push_back(d.Turn(s, c, m));
    }
  } else if (name == "dropthink") {
    const int s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      if (!m.empty()) {
        for (auto& r : m.back().t) r.erase(r.begin(), r.begin() + r.size() / 3);
      }
      m.push_back(c.User());
      m.push_back(d.Turn(s, c, m));
    }
  } else if (name == "branch") {
    const int s = d.NewSession();
    Msgs m;
    const int main_turns = std::max(3, turns - 2);
    for (int t = 0; t < main_turns; ++t) {
      m.push_back(c.User());
      m.push_back(d.Turn(s, c, m));
    }
    Msgs b(m.begin(), m.end() - 4);  // back two turns
    for (int t = 0; t < 2; ++t) {
      b.push_back(c.User());
      b.push_back(d.Turn(s, c, b));
    }
    for (int t = main_turns; t < turns + 1; ++t) {  // return to the main line
      m.push_back(c.User());
      m.push_back(d.Turn(s, c, m));
    }
  } else if (name == "interleave") {
    const int a = d.NewSession(), b = d.NewSession();
    Msgs ma, mb;
    for (int t = 0; t < turns; ++t) {
      ma.push_back(c.User());
      ma.push_back(d.Turn(a, c, ma));
      mb.push_back(c.User());
      mb.push_back(d.Turn(b, c, mb));
    }
  } else if (name == "cancel") {
    const int s = d.NewSession();
    Msgs conv[2];  // on the session, sessionless
    for (int t = 0; t < turns; ++t) {
      for (int k = 0; k < 2; ++k) {
        conv[k].push_back(c.User());
        d.cancel_after = 2 + static_cast<int>((*c.rng)() % 39);
        conv[k].push_back(d.Turn(k == 0 ? s : Driver::kSessionless, c, conv[k]));
      }
    }
    d.cancel_after = 0;
  } else if (name == "manyusers") {
    std::vector<int> s;
    std::vector<Msgs> m(8);
    for (int u = 0; u < 8; ++u) s.push_back(d.NewSession());
    for (int t = 0; t < std::max(1, turns / 2); ++t) {
      for (int u = 0; u < 8; ++u) {
        m[u].push_back(c.User());
        m[u].push_back(d.Turn(s[u], c, m[u]));
      }
    }
  }
}

// A model under test: how the servers load it, and the file for the
// in-process engines and the long-prompt overhead.
struct ModelUnderTest {
  std::string name;
  service::ModelSpec spec;
  std::unique_ptr<Backend> backend;  // in process
  bool large = false;
};

Conv NewConv(int vocab, std::mt19937& rng) {
  Conv c;
  c.vocab = vocab;
  c.rng = &rng;
  c.system = c.Tokens(300);
  c.system[0] = 1;
  return c;
}

// In process: a scenario with checkpointing on and off side by side: {on, off}.
std::pair<Totals, Totals> MeasureInProcess(Backend& backend, const CheckpointOptions& options,
                                           const std::string& scenario, int turns, uint32_t seed) {
  auto store = CheckpointStore::Create(options.store());
  if (!store.ok()) Die("store", store.status());
  std::shared_ptr<CheckpointStore> shared(std::move(*store));
  CheckpointOptions disabled = options;
  disabled.enabled = false;
  auto on = CheckpointEngine::Create(&backend, shared, options);
  if (!on.ok()) Die("engine", on.status());
  auto off = CheckpointEngine::Create(&backend, nullptr, disabled);
  if (!off.ok()) Die("engine", off.status());
  std::mt19937 rng(seed);
  Conv c = NewConv(backend.info().n_vocab, rng);
  std::unique_ptr<bench::Driver> driver = bench::NewEngineDriver(on->get(), off->get(), rng);
  bench::Driver& d = *driver;
  RunScenario(scenario, d, c, turns);
  d.totals[0].peak_bytes = shared->stats().peak_ram_bytes;
  return {d.totals[0], d.totals[1]};
}

// Over gRPC: a fresh pair of servers (checkpointing on, off) per scenario.
std::pair<Totals, Totals> MeasureGrpc(const ModelUnderTest& model, const CheckpointOptions& options, int threads,
                                      float temperature, const std::string& scenario, int turns, uint32_t seed) {
  CheckpointOptions disabled = options;
  disabled.enabled = false;
  std::unique_ptr<service::Server> on = bench::StartServer(model.spec, options, threads);
  std::unique_ptr<service::Server> off = bench::StartServer(model.spec, disabled, threads);
  std::mt19937 rng(seed);
  Conv c = NewConv(model.backend->info().n_vocab, rng);
  std::unique_ptr<bench::Driver> driver =
      bench::NewGrpcDriver(on->port(), off->port(), model.spec.name, temperature, seed, rng);
  bench::Driver& d = *driver;
  RunScenario(scenario, d, c, turns);
  d.totals[0].peak_bytes = on->models().store() != nullptr ? on->models().store()->stats().peak_ram_bytes : 0;
  return {d.totals[0], d.totals[1]};
}

// Temporary files of the synthetic models, removed at exit.
std::string g_temp_dir;
void RemoveTempDir() {
  if (g_temp_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(g_temp_dir, ec);
}

std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  if (g_temp_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cairn-multiturn-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::exit(1);
    }
    g_temp_dir = tmpl;
    std::atexit(RemoveTempDir);
  }
  const std::string path = g_temp_dir + "/" + name + ".gguf";
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) {
    std::fprintf(stderr, "writing %s failed\n", path.c_str());
    std::exit(1);
  }
  return path;
}

service::ModelSpec FileSpec(const std::string& name, const std::string& path) {
  return service::ModelSpec{.name = name, .path = path, .family = "", .builtin = false};
}

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  std::vector<std::string> args(argv + 1, argv + argc);
  CheckpointOptions options;
  if (absl::Status s = checkpoint::ParseCheckpointFlags(&args, &options); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  bool synthetic = false, golden = true, in_process = false;
  int turns = 6, threads = 1;
  uint32_t seed = 1;
  float temperature = 0.0f;
  std::vector<std::string> scenarios = {"append",     "regenerate", "edit", "dropthink", "branch",
                                        "interleave", "manyusers",  "trim", "cancel",    "agent"};
  std::vector<std::pair<std::string, std::string>> files;
  double max_ratio = 0;  // 0: report only
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&] { return bench::FlagValue(args, &i); };
    if (a == "--synthetic")
      synthetic = true;
    else if (a == "--only-synthetic")
      synthetic = true, golden = false;
    else if (a == "--in-process")
      in_process = true;
    else if (a == "--turns")
      turns = std::atoi(value().c_str());
    else if (a == "--seed")
      seed = static_cast<uint32_t>(std::atoi(value().c_str()));
    else if (a == "--threads")
      threads = std::atoi(value().c_str());
    else if (a == "--temperature")
      temperature = static_cast<float>(std::atof(value().c_str()));
    else if (a == "--max-ratio")
      max_ratio = std::atof(value().c_str());
    else if (a == "--scenarios")
      scenarios = absl::StrSplit(value(), ',');
    else if (a == "--model") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--model NAME=PATH\n");
        return 2;
      }
      files.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "multiturn [--in-process] [--synthetic] [--only-synthetic] [--model NAME=PATH]... [--turns N]\n"
          "          [--seed N] [--threads N] [--temperature T] [--scenarios a,b,...|none] [--max-ratio R]\n"
          "  by default through gRPC: two cairn servers in this process on 127.0.0.1, checkpoints on/off,\n"
          "  replies sampled at --temperature (default 0: greedy);\n"
          "  --in-process drives the checkpoint engine directly instead;\n"
          "  --max-ratio R exits 1 when a scenario recomputes more than R times its minimum\n%s",
          checkpoint::CheckpointFlagsHelp().c_str());
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  if (turns < 1) {
    std::fprintf(stderr, "--turns must be at least 1\n");
    return 2;
  }
  std::string shared =
      std::getenv("CAIRN_SHARED_DIR") ? std::getenv("CAIRN_SHARED_DIR") : std::string(CAIRN_SOURCE_DIR) + "/../shared";
  // Files named with --model must load; the default golden files may be
  // absent (a clone without ../shared) and are skipped with a message.
  const bool files_given = !files.empty();
  if (golden && files.empty()) {
    for (const char* m : {"llama", "gemma3", "mamba2", "granitehybrid", "qwen35"}) {
      files.emplace_back(m, shared + "/golden/models/" + m + ".gguf");
    }
  }
  BackendRegistry registry;
  if (absl::Status s = RegisterBuiltinBackends(registry); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  BackendOptions bo;
  bo.n_threads = threads;
  std::vector<ModelUnderTest> models;
  auto add = [&](const service::ModelSpec& spec, std::shared_ptr<const ModelFile> file, bool large) {
    bo.name = spec.name;
    auto b = registry.Create(std::move(file), bo);
    if (!b.ok() && files_given) Die(spec.name, b.status());
    if (!b.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", spec.name.c_str(), b.status().ToString().c_str());
      return;
    }
    models.push_back(ModelUnderTest{.name = spec.name, .spec = spec, .backend = std::move(*b), .large = large});
  };
  for (const auto& [name, path] : files) {
    auto m = ModelFile::Open(path);
    if (!m.ok() && files_given) Die(name, m.status());
    if (!m.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", name.c_str(), m.status().ToString().c_str());
      continue;
    }
    add(FileSpec(name, path), std::shared_ptr<const ModelFile>(std::move(*m)), false);
  }
  if (synthetic) {
    for (const auto& [name, build] : {std::pair{std::string("synthetic-llama"), &SyntheticLlama},
                                      std::pair{std::string("synthetic-mamba2"), &SyntheticMamba2}}) {
      const std::string path = WriteTemp(name, build());
      auto m = ModelFile::Open(path);
      if (!m.ok()) Die(name, m.status());
      add(FileSpec(name, path), std::shared_ptr<const ModelFile>(std::move(*m)), true);
    }
    // The service's built-in large hybrid (granitehybrid shape), served by name.
    const std::string hybrid = "demo-hybrid-large";
    auto demo = service::BuildDemoModel(hybrid);
    if (!demo.ok()) Die(hybrid, demo.status());
    add(service::ModelSpec{.name = hybrid, .path = hybrid, .family = "", .builtin = true}, demo->file, true);
  }
  std::printf(
      "multiturn: seed %u, %d turns, 300-token system prompt, 40-120-token users, %d-token replies; "
      "checkpoint RAM budget %.0f MiB, every %d positions, tail every %d\n",
      seed, turns, kReply, options.ram_budget_bytes / 1048576.0, options.every_n, options.tail_every);
  if (in_process) {
    std::printf(
        "in process, through the checkpoint engine (replies from the seeded generator); "
        "ttft = the Prefill call\n");
  } else {
    std::printf(
        "through gRPC: two cairn servers in this process on 127.0.0.1 (checkpoints on / off), a fresh "
        "pair per scenario, %d thread(s) per model; %d-token replies at temperature %g;\n"
        "ttft = the server's Timings.time_to_first_token_seconds, mean per request "
        "(client-side send to first token read in the last column)\n",
        threads, kReply, temperature);
  }
  double worst_ratio = 0;
  std::string worst;
  for (auto& m : models) {
    const ModelInfo& info = m.backend->info();
    std::printf("\n%s (%s, %s, %.1f MiB weights)\n", m.name.c_str(), info.family.c_str(), info.arch.c_str(),
                info.weight_bytes / 1048576.0);
    const int overhead_positions = m.large ? 2048 : 1024;
    if (scenarios.empty() || scenarios[0] == "none") {
      bench::PrintCheckpointOverhead(*m.backend, options, overhead_positions, 3);
      continue;
    }
    std::printf("  %-11s %8s %10s %8s %7s %12s %12s %8s %11s\n", "scenario", "prompt", "recomputed", "minimum", "ratio",
                "ttft cached", "ttft off", "speedup", "peak ckpt");
    for (const std::string& sc : scenarios) {
      if (sc == "agent") {
        const std::string tmpl = shared + "/chat_templates/templates/Qwen3.5-4B.jinja";
        if (in_process || !std::filesystem::exists(tmpl)) continue;  // messages need a server and the template
        const bench::AgentTotals a = bench::MeasureAgent(m.spec, tmpl, options, threads, turns, seed);
        if (a.requests == 0) continue;  // no tokenizer
        const double ratio = a.minimum > 0 ? static_cast<double>(a.recomputed) / a.minimum : 0;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = m.name + " " + sc;
        std::printf("  %-11s %8lld %10lld %8lld %7.3f  (%d requests as messages, Qwen3.5 template)\n", sc.c_str(),
                    static_cast<long long>(a.prompt), static_cast<long long>(a.recomputed),
                    static_cast<long long>(a.minimum), ratio, a.requests);
        std::fflush(stdout);
        continue;
      }
      if (sc == "cancel" && in_process) continue;  // cancels need a server
      auto [on, off] = in_process ? MeasureInProcess(*m.backend, options, sc, turns, seed)
                                  : MeasureGrpc(m, options, threads, temperature, sc, turns, seed);
      if (on.requests == 0) {
        std::fprintf(stderr, "unknown scenario %s\n", sc.c_str());
        return 2;
      }
      const double ratio = on.minimum > 0 ? static_cast<double>(on.recomputed) / on.minimum : 0;
      if (ratio > worst_ratio) worst_ratio = ratio, worst = m.name + " " + sc;
      std::printf("  %-11s %8lld %10lld %8lld %7.3f %9.2f ms %9.2f ms %7.2fx %8.2f MiB  (off: %lld recomputed",
                  sc.c_str(), static_cast<long long>(on.prompt), static_cast<long long>(on.recomputed),
                  static_cast<long long>(on.minimum), ratio, 1e3 * on.ttft / on.requests, 1e3 * off.ttft / off.requests,
                  off.ttft / std::max(1e-9, on.ttft), on.peak_bytes / 1048576.0,
                  static_cast<long long>(off.recomputed));
      if (!in_process) {
        std::printf(", minimum %lld; client ttft %.2f / %.2f ms", static_cast<long long>(off.minimum),
                    1e3 * on.client_ttft / on.requests, 1e3 * off.client_ttft / off.requests);
        if (on.periodic_replies > 0) {
          std::printf("; %d of %d replies periodic", on.periodic_replies, on.replies);
        }
      }
      std::printf(")\n");
      std::fflush(stdout);
    }
    bench::PrintCheckpointOverhead(*m.backend, options, overhead_positions, 3);
  }
  std::printf("\nworst ratio recomputed/minimum: %.3f%s%s%s\n", worst_ratio, worst.empty() ? "" : " (", worst.c_str(),
              worst.empty() ? "" : ")");
  if (max_ratio > 0 && worst_ratio > max_ratio) {
    std::fprintf(stderr, "multiturn: %s recomputed %.3f x its minimum, above --max-ratio %.3f\n", worst.c_str(),
                 worst_ratio, max_ratio);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
