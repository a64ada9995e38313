// bench/multiturn: prompt reuse of the checkpoint engine on chat scenarios,
// per model family, against the least any cache could do, and time to first
// token with checkpointing on vs off (the baseline), both measured in this run.
//
// Scenarios (seeded random token conversations: a 300-token system prompt,
// 40-120-token user messages, 48-token replies decoded through the engine):
//   append      each turn extends the last
//   regenerate  each reply is generated twice from the same prompt
//   edit        the last user message is edited (second half replaced)
//   dropthink   every previous reply is re-sent without its first third
//   branch      back two turns, two new turns, then return to the main line
//   interleave  two conversations alternating (a session each)
//   manyusers   8 conversations sharing the system prompt, round robin
// "minimum" is the part of each prompt that no earlier request computed
// (prompt or generated tokens); ratio = recomputed / minimum over a scenario.
// TTFT is the Prefill call (restore + forward + captures); each request runs
// with checkpointing on and then off back to back, so both see the same load.
//
// Models: the golden models of each family (tiny: ratios) and, with
// --synthetic, bigger synthetic llama and mamba2 models where compute
// dominates (TTFT). Also reports the checkpointing cost on a long prompt.
//
//   multiturn [--synthetic] [--only-synthetic] [--model NAME=PATH]... [--turns 6]
//             [--seed 1] [--threads 1] [--scenarios append,branch,...|none] [checkpoint flags]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "checkpoint/engine.h"
#include "checkpoint/options.h"

namespace cairn {
namespace {

using checkpoint::CheckpointEngine;
using checkpoint::CheckpointOptions;
using checkpoint::CheckpointStore;
using checkpoint::Prompt;
using checkpoint::Sequence;
using checkpoint::SymbolKey;
using bench::Clock;
using bench::Since;

// ---- synthetic models (random weights, realistic ratios of shapes) ----

std::shared_ptr<const ModelFile> SyntheticLlama() {
  const int64_t embd = 768, ff = 2048, vocab = 8192, layers = 8, heads = 12, kv_heads = 4;
  GgufWriter w;
  bench::Rng rng;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.context_length", 8192);
  w.SetUint32("llama.embedding_length", embd);
  w.SetUint32("llama.block_count", layers);
  w.SetUint32("llama.feed_forward_length", ff);
  w.SetUint32("llama.attention.head_count", heads);
  w.SetUint32("llama.attention.head_count_kv", kv_heads);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", 500000.0f);
  const int64_t kv = embd / heads * kv_heads;
  const float a = 1.0f / std::sqrt(static_cast<float>(embd));
  const float b = 1.0f / std::sqrt(static_cast<float>(ff));
  std::vector<float> ones(embd, 1.0f);
  w.AddF32Tensor("token_embd.weight", {embd, vocab}, rng.SymmetricVec(embd * vocab, 1.0f));
  w.AddF32Tensor("output_norm.weight", {embd}, ones);
  w.AddF32Tensor("output.weight", {embd, vocab}, rng.SymmetricVec(embd * vocab, a));
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.AddF32Tensor(p + "attn_norm.weight", {embd}, ones);
    w.AddF32Tensor(p + "ffn_norm.weight", {embd}, ones);
    w.AddF32Tensor(p + "attn_q.weight", {embd, embd}, rng.SymmetricVec(embd * embd, a));
    w.AddF32Tensor(p + "attn_k.weight", {embd, kv}, rng.SymmetricVec(embd * kv, a));
    w.AddF32Tensor(p + "attn_v.weight", {embd, kv}, rng.SymmetricVec(embd * kv, a));
    w.AddF32Tensor(p + "attn_output.weight", {embd, embd}, rng.SymmetricVec(embd * embd, a));
    w.AddF32Tensor(p + "ffn_gate.weight", {embd, ff}, rng.SymmetricVec(embd * ff, a));
    w.AddF32Tensor(p + "ffn_up.weight", {embd, ff}, rng.SymmetricVec(embd * ff, a));
    w.AddF32Tensor(p + "ffn_down.weight", {ff, embd}, rng.SymmetricVec(ff * embd, b));
  }
  return bench::ModelOrDie(w.Serialize(), "synthetic-llama");
}

std::shared_ptr<const ModelFile> SyntheticMamba2() {
  const int64_t embd = 768, layers = 12, d_state = 64, n_head = 24, n_group = 1, d_conv = 4, vocab = 8192;
  const int64_t d_inner = 2 * embd;
  const int64_t conv_ch = d_inner + 2 * n_group * d_state;
  const int64_t in_proj = 2 * d_inner + 2 * n_group * d_state + n_head;
  GgufWriter w;
  bench::Rng rng;
  const std::string ar = "mamba2";
  w.SetString("general.architecture", ar);
  w.SetUint32(ar + ".context_length", 1 << 20);
  w.SetUint32(ar + ".embedding_length", embd);
  w.SetUint32(ar + ".block_count", layers);
  w.SetFloat32(ar + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetUint32(ar + ".ssm.conv_kernel", d_conv);
  w.SetUint32(ar + ".ssm.inner_size", d_inner);
  w.SetUint32(ar + ".ssm.state_size", d_state);
  w.SetUint32(ar + ".ssm.time_step_rank", n_head);
  w.SetUint32(ar + ".ssm.group_count", n_group);
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(embd));
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(d_inner));
  w.AddF32Tensor("token_embd.weight", {embd, vocab}, rng.SymmetricVec(embd * vocab, 1.0f));
  w.AddF32Tensor("output_norm.weight", {embd}, std::vector<float>(embd, 1.0f));
  w.AddF32Tensor("output.weight", {embd, vocab}, rng.SymmetricVec(embd * vocab, in_scale));
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.AddF32Tensor(p + "attn_norm.weight", {embd}, std::vector<float>(embd, 1.0f));
    w.AddF32Tensor(p + "ssm_in.weight", {embd, in_proj}, rng.SymmetricVec(embd * in_proj, in_scale));
    w.AddF32Tensor(p + "ssm_conv1d.weight", {d_conv, conv_ch}, rng.SymmetricVec(d_conv * conv_ch, 0.5f));
    w.AddF32Tensor(p + "ssm_conv1d.bias", {conv_ch}, rng.SymmetricVec(conv_ch, 0.1f));
    std::vector<float> dt(n_head), a(n_head);
    for (int64_t h = 0; h < n_head; ++h) {
      dt[h] = -3.0f + rng.Symmetric(1.0f);
      a[h] = -4.5f + rng.Symmetric(3.5f);
    }
    w.AddF32Tensor(p + "ssm_dt.bias", {n_head}, dt);
    w.AddF32Tensor(p + "ssm_a", {1, n_head}, a);
    w.AddF32Tensor(p + "ssm_d", {1, n_head}, std::vector<float>(n_head, 1.0f));
    w.AddF32Tensor(p + "ssm_norm.weight", {d_inner / n_group, n_group}, std::vector<float>(d_inner, 1.0f));
    w.AddF32Tensor(p + "ssm_out.weight", {d_inner, embd}, rng.SymmetricVec(d_inner * embd, out_scale));
  }
  return bench::ModelOrDie(w.Serialize(), "synthetic-mamba2");
}

// ---- scenarios ----

struct Totals {
  int64_t prompt = 0, recomputed = 0, minimum = 0;
  int requests = 0;
  double ttft = 0;
  size_t peak_bytes = 0;
};

// One session in both modes: the same requests run with checkpointing on
// and off back to back, so both TTFTs see the same machine load.
struct Pair {
  std::unique_ptr<Sequence> seq[2];  // [0] on, [1] off
};

class Driver {
 public:
  Driver(CheckpointEngine* on, CheckpointEngine* off, std::mt19937& rng) : engine_{on, off}, rng_(rng) {}

  std::unique_ptr<Pair> NewSession() {
    auto p = std::make_unique<Pair>();
    for (int m = 0; m < 2; ++m) {
      auto s = engine_[m]->NewSequence();
      if (!s.ok()) {
        std::fprintf(stderr, "new sequence: %s\n", s.status().ToString().c_str());
        std::exit(1);
      }
      p->seq[m] = std::move(*s);
    }
    return p;
  }

  // Prefill in both modes, measured against what earlier requests computed.
  void Request(Pair& pair, const Prompt& p) {
    size_t best = 0;
    for (const auto& path : computed_) best = std::max(best, checkpoint::CommonPrefix(path, p.keys()));
    for (int k = 0; k < 2; ++k) {
      const int m = (k + requests_) % 2;  // alternate which mode goes first (warm caches)
      const auto t0 = Clock::now();
      auto r = engine_[m]->Prefill(*pair.seq[m], p);
      const double secs = Since(t0);
      if (!r.ok()) {
        std::fprintf(stderr, "prefill: %s\n", r.status().ToString().c_str());
        std::exit(1);
      }
      totals[m].prompt += p.positions();
      totals[m].recomputed += r->stats.recomputed;
      totals[m].minimum += p.positions() - p.pos_after(best);
      totals[m].ttft += secs;
      ++totals[m].requests;
    }
    computed_.emplace_back(p.keys().begin(), p.keys().end());
    ++requests_;
  }

  // A reply of n tokens decoded in both modes (content from the seeded
  // generator: reuse does not depend on it).
  std::vector<TokenId> Reply(Pair& pair, int n, int vocab) {
    std::vector<TokenId> out;
    for (int i = 0; i < n; ++i) out.push_back(3 + static_cast<TokenId>(rng_() % (vocab - 3)));
    for (int m = 0; m < 2; ++m) {
      for (TokenId t : out) {
        auto r = engine_[m]->Decode(*pair.seq[m], t);
        if (!r.ok()) {
          std::fprintf(stderr, "decode: %s\n", r.status().ToString().c_str());
          std::exit(1);
        }
      }
      engine_[m]->EndGeneration(*pair.seq[m]).IgnoreError();
    }
    const auto& h = pair.seq[0]->history().keys();
    computed_.emplace_back(h.begin(), h.end());
    return out;
  }

  Totals totals[2];

 private:
  CheckpointEngine* engine_[2];
  std::mt19937& rng_;
  int requests_ = 0;
  std::vector<std::vector<SymbolKey>> computed_;
};

using Msgs = std::vector<std::vector<TokenId>>;

struct Conv {
  std::vector<TokenId> system;
  int vocab = 0;
  std::mt19937* rng = nullptr;
  std::vector<TokenId> Tokens(int n) {
    std::vector<TokenId> t(n);
    for (auto& x : t) x = 3 + static_cast<TokenId>((*rng)() % (vocab - 3));
    return t;
  }
  std::vector<TokenId> User() { return Tokens(40 + (*rng)() % 81); }
  Prompt Build(const Msgs& msgs) const {
    Prompt p;
    p.AddTokens(system);
    p.EndMessage();
    for (const auto& m : msgs) {
      p.AddTokens(m);
      p.EndMessage();
    }
    return p;
  }
};

constexpr int kReply = 48;

void RunScenario(const std::string& name, Driver& d, Conv& c, int turns) {
  const int V = c.vocab;
  if (name == "append") {
    auto s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      m.push_back(d.Reply(*s, kReply, V));
    }
  } else if (name == "regenerate") {
    auto s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      d.Reply(*s, kReply, V);
      d.Request(*s, c.Build(m));  // regenerate
      m.push_back(d.Reply(*s, kReply, V));
    }
  } else if (name == "edit") {
    auto s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      d.Reply(*s, kReply, V);
      auto& u = m.back();  // edit: second half replaced
      auto tail = c.Tokens(static_cast<int>(u.size() - u.size() / 2));
      std::copy(tail.begin(), tail.end(), u.begin() + u.size() / 2);
      d.Request(*s, c.Build(m));
      m.push_back(d.Reply(*s, kReply, V));
    }
  } else if (name == "dropthink") {
    auto s = d.NewSession();
    Msgs m;
    for (int t = 0; t < turns; ++t) {
      if (!m.empty()) {
        auto& r = m.back();
        r.erase(r.begin(), r.begin() + r.size() / 3);
      }
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      m.push_back(d.Reply(*s, kReply, V));
    }
  } else if (name == "branch") {
    auto s = d.NewSession();
    Msgs m;
    const int main_turns = std::max(3, turns - 2);
    for (int t = 0; t < main_turns; ++t) {
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      m.push_back(d.Reply(*s, kReply, V));
    }
    Msgs b(m.begin(), m.end() - 4);  // back two turns
    for (int t = 0; t < 2; ++t) {
      b.push_back(c.User());
      d.Request(*s, c.Build(b));
      b.push_back(d.Reply(*s, kReply, V));
    }
    for (int t = main_turns; t < turns + 1; ++t) {  // return to the main line
      m.push_back(c.User());
      d.Request(*s, c.Build(m));
      m.push_back(d.Reply(*s, kReply, V));
    }
  } else if (name == "interleave") {
    auto a = d.NewSession(), b = d.NewSession();
    Msgs ma, mb;
    for (int t = 0; t < turns; ++t) {
      ma.push_back(c.User());
      d.Request(*a, c.Build(ma));
      ma.push_back(d.Reply(*a, kReply, V));
      mb.push_back(c.User());
      d.Request(*b, c.Build(mb));
      mb.push_back(d.Reply(*b, kReply, V));
    }
  } else if (name == "manyusers") {
    std::vector<std::unique_ptr<Pair>> s;
    std::vector<Msgs> m(8);
    for (int u = 0; u < 8; ++u) s.push_back(d.NewSession());
    for (int t = 0; t < std::max(1, turns / 2); ++t) {
      for (int u = 0; u < 8; ++u) {
        m[u].push_back(c.User());
        d.Request(*s[u], c.Build(m[u]));
        m[u].push_back(d.Reply(*s[u], kReply, V));
      }
    }
  }
}

struct ModelUnderTest {
  std::string name;
  std::unique_ptr<Backend> backend;
};

// Runs a scenario with checkpointing on and off side by side: {on, off}.
std::pair<Totals, Totals> Measure(Backend& backend, const CheckpointOptions& options,
                                  const std::string& scenario, int turns, uint32_t seed) {
  auto store = CheckpointStore::Create(options.store());
  if (!store.ok()) {
    std::fprintf(stderr, "store: %s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  std::shared_ptr<CheckpointStore> shared(std::move(*store));
  CheckpointOptions disabled = options;
  disabled.enabled = false;
  auto on = CheckpointEngine::Create(&backend, shared, options);
  auto off = CheckpointEngine::Create(&backend, nullptr, disabled);
  if (!on.ok() || !off.ok()) {
    std::fprintf(stderr, "engine: %s %s\n", on.status().ToString().c_str(), off.status().ToString().c_str());
    std::exit(1);
  }
  std::mt19937 rng(seed);
  Conv c;
  c.vocab = backend.info().n_vocab;
  c.rng = &rng;
  c.system = c.Tokens(300);
  c.system[0] = 1;
  Driver d(on->get(), off->get(), rng);
  RunScenario(scenario, d, c, turns);
  d.totals[0].peak_bytes = shared->stats().peak_ram_bytes;
  return {d.totals[0], d.totals[1]};
}

// Checkpointing cost on one long prompt (one message): prefill with
// checkpoints on (interval, tail and end captures, and the chunk splits they
// force) against off, interleaved, best of `reps`; then a prompt diverging
// near the end restores one.
void Overhead(Backend& backend, const CheckpointOptions& options, int positions, int reps) {
  std::mt19937 rng(7);
  const int V = backend.info().n_vocab;
  std::vector<TokenId> t(positions);
  for (auto& x : t) x = 3 + static_cast<TokenId>(rng() % (V - 3));
  Prompt p;
  p.AddTokens(t);
  p.EndMessage();
  CheckpointOptions off = options;
  off.enabled = false;
  double best_on = 1e30, best_off = 1e30;
  checkpoint::PrefillStats on_stats;
  std::unique_ptr<CheckpointEngine> keep;
  std::unique_ptr<Sequence> keep_seq;
  for (int rep = 0; rep < reps; ++rep) {
    for (int mode = 0; mode < 2; ++mode) {
      const CheckpointOptions& o = mode == 0 ? off : options;
      std::shared_ptr<CheckpointStore> store;
      if (o.enabled) store = std::move(*CheckpointStore::Create(o.store()));
      auto engine = CheckpointEngine::Create(&backend, store, o);
      if (!engine.ok()) return;
      auto seq = (*engine)->NewSequence();
      const auto t0 = Clock::now();
      auto r = (*engine)->Prefill(**seq, p);
      const double secs = Since(t0);
      if (!r.ok()) return;
      if (mode == 0) {
        best_off = std::min(best_off, secs);
      } else if (secs < best_on) {
        best_on = secs;
        on_stats = r->stats;
        keep_seq.reset();
        keep = std::move(*engine);
        keep_seq = std::move(*seq);
      }
    }
  }
  const auto& s = on_stats;
  std::printf("  long prompt %d positions: prefill %.1f ms with checkpoints, %.1f ms without (best of %d, "
              "interleaved): %+.2f%%; %d checkpoints of %.1f KiB, capture %.3f ms each (%.2f%% of forward time)",
              positions, 1e3 * best_on, 1e3 * best_off, reps, 100.0 * (best_on - best_off) / best_off, s.captured,
              s.captured ? s.captured_bytes / 1024.0 / s.captured : 0.0,
              s.captured ? 1e3 * s.capture_seconds / s.captured : 0.0,
              100.0 * s.capture_seconds / std::max(1e-9, s.forward_seconds));
  std::vector<TokenId> t2 = t;
  t2[positions - positions / 8] = 3 + (t2[positions - positions / 8] + 1) % (V - 3);
  Prompt q;
  q.AddTokens(t2);
  q.EndMessage();
  auto r2 = keep->Prefill(*keep_seq, q);
  if (r2.ok() && r2->stats.restored_pos >= 0) {
    std::printf("; diverging at %d: restore at %d in %.3f ms, %d positions recomputed",
                positions - positions / 8, r2->stats.restored_pos, 1e3 * r2->stats.restore_seconds,
                r2->stats.recomputed);
  } else if (r2.ok()) {
    std::printf("; diverging at %d: cut back, %d positions recomputed", positions - positions / 8,
                r2->stats.recomputed);
  }
  std::printf("\n");
  keep_seq.reset();
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CheckpointOptions options;
  if (absl::Status s = checkpoint::ParseCheckpointFlags(&args, &options); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  bool synthetic = false, golden = true;
  int turns = 6, threads = 1;
  uint32_t seed = 1;
  std::vector<std::string> scenarios = {"append", "regenerate", "edit", "dropthink",
                                        "branch", "interleave", "manyusers"};
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return args[++i];
    };
    if (a == "--synthetic") synthetic = true;
    else if (a == "--only-synthetic") synthetic = true, golden = false;
    else if (a == "--turns") turns = std::atoi(value().c_str());
    else if (a == "--seed") seed = static_cast<uint32_t>(std::atoi(value().c_str()));
    else if (a == "--threads") threads = std::atoi(value().c_str());
    else if (a == "--scenarios") scenarios = absl::StrSplit(value(), ',');
    else if (a == "--model") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--model NAME=PATH\n");
        return 2;
      }
      files.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--help" || a == "-h") {
      std::printf("multiturn [--synthetic] [--only-synthetic] [--model NAME=PATH]... [--turns N] [--seed N]\n"
                  "          [--threads N] [--scenarios a,b,...]\n%s",
                  checkpoint::CheckpointFlagsHelp().c_str());
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  std::string shared = std::getenv("CAIRN_SHARED_DIR") ? std::getenv("CAIRN_SHARED_DIR")
                                                       : std::string(CAIRN_SOURCE_DIR) + "/../shared";
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
  for (const auto& [name, path] : files) {
    auto m = ModelFile::Open(path);
    if (!m.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", name.c_str(), m.status().ToString().c_str());
      continue;
    }
    bo.name = name;
    auto b = registry.Create(std::shared_ptr<const ModelFile>(std::move(*m)), bo);
    if (!b.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", name.c_str(), b.status().ToString().c_str());
      continue;
    }
    models.push_back({name, std::move(*b)});
  }
  if (synthetic) {
    for (auto [name, file] : {std::pair{std::string("synthetic-llama"), SyntheticLlama()},
                              std::pair{std::string("synthetic-mamba2"), SyntheticMamba2()}}) {
      bo.name = name;
      auto b = registry.Create(file, bo);
      if (!b.ok()) {
        std::fprintf(stderr, "skipping %s: %s\n", name.c_str(), b.status().ToString().c_str());
        continue;
      }
      models.push_back({name, std::move(*b)});
    }
  }
  std::printf("multiturn: seed %u, %d turns, 300-token system prompt, 40-120-token users, %d-token replies; "
              "checkpoint RAM budget %.0f MiB, every %d positions\n",
              seed, turns, kReply, options.ram_budget_bytes / 1048576.0, options.every_n);
  double worst_ratio = 0;
  for (auto& m : models) {
    const ModelInfo& info = m.backend->info();
    std::printf("\n%s (%s, %s, %.1f MiB weights)\n", m.name.c_str(), info.family.c_str(), info.arch.c_str(),
                info.weight_bytes / 1048576.0);
    if (scenarios.empty() || scenarios[0] == "none") {
      Overhead(*m.backend, options, m.name.rfind("synthetic", 0) == 0 ? 2048 : 1024, 3);
      continue;
    }
    std::printf("  %-11s %8s %10s %8s %7s %12s %12s %8s %11s\n", "scenario", "prompt", "recomputed", "minimum",
                "ratio", "ttft cached", "ttft off", "speedup", "peak ckpt");
    for (const std::string& sc : scenarios) {
      auto [on, off] = Measure(*m.backend, options, sc, turns, seed);
      const double ratio = on.minimum > 0 ? static_cast<double>(on.recomputed) / on.minimum : 0;
      worst_ratio = std::max(worst_ratio, ratio);
      std::printf("  %-11s %8lld %10lld %8lld %7.3f %9.2f ms %9.2f ms %7.2fx %8.2f MiB  (off: %lld recomputed)\n",
                  sc.c_str(), static_cast<long long>(on.prompt), static_cast<long long>(on.recomputed),
                  static_cast<long long>(on.minimum), ratio, 1e3 * on.ttft / on.requests,
                  1e3 * off.ttft / off.requests, off.ttft / std::max(1e-9, on.ttft), on.peak_bytes / 1048576.0,
                  static_cast<long long>(off.recomputed));
      std::fflush(stdout);
    }
    Overhead(*m.backend, options, m.name.rfind("synthetic", 0) == 0 ? 2048 : 1024, 3);
  }
  std::printf("\nworst ratio recomputed/minimum: %.3f\n", worst_ratio);
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
