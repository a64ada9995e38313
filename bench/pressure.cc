// bench/pressure: prompt reuse when the checkpoint RAM budget cannot hold
// everything, per model family, for cairn's retention policy and the
// baselines, all in one run on the same seeded trace.
//
// The trace (bench/workload.h): many users, a few long system prompts shared
// with Zipf popularity, multi-turn conversations with regenerate, edit,
// dropthink, branch and tree moves, clients without message boundaries that
// trim or edit early turns and re-send cut replies, sessionless clients,
// think times, idle gaps that expire sessions, arrivals interleaved. It runs
// in process against the real checkpoint engine and the real backends
// (Prefill, Decode of every reply token, EndGeneration; a sessionless
// request's sequence is parked and dropped, an expired session's dropped), as
// the service drives them.
//
// Policies, on the same store, engine and budget (CheckpointOptions::
// cache_policy, retention.h):
//   cairn      cairn's placement and ForecastRetention
//   lru        cairn's placement, least recently used first
//   marconi    Marconi's placement (divergence points and the end of each
//              request only) and eviction, for each --alphas value; the best
//              alpha per budget is reported (Marconi tunes alpha online)
//   offline    cairn's placement and OfflineRetention: Belady-style, with the
//              reference stream of an unlimited store (a first run)
// The working set is the peak of an unlimited store under cairn's placement
// (that first run); the sweep's budgets are fractions of it.
//
// Per budget and policy: token hit rate (positions reused / prompt
// positions), FLOPs saved (estimated from the model's matrices: 2 x
// parameters per position plus 4 x attention width x context), recomputed /
// minimum (the part of each prompt no earlier request computed), peak store
// bytes. TTFT is measured on a compute-dominated model (demo-hybrid-large:
// 8 layers of width 512, where a prefill costs milliseconds) with a smaller
// trace; on the tiny golden models time says little.
//
// Placement without boundaries: a trace of plain-prompt clients only, at the
// default budget, recomputed / minimum per move, with cairn's placement,
// without its spaced points, and with the placement before spaced points,
// divergence points and kept turn checkpoints.
//
//   pressure [--users 64] [--seed 1 | --seeds 1,2,3] [--budgets 2,5,10,25,50,100]
//            [--policies cairn,lru,marconi,offline] [--alphas 0.5,2]
//            [--model NAME=PATH]... [--ttft-model demo-hybrid-large|none]
//            [--ttft-users 12] [--sections sweep,noboundary,ttft] [--threads 1]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "backends/model/gguf.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "bench/offline_retention.h"
#include "bench/workload.h"
#include "checkpoint/engine.h"
#include "checkpoint/options.h"
#include "checkpoint/prefix_index.h"
#include "service/programs/demo_models.h"

namespace cairn {
namespace {

using bench::Clock;
using bench::Die;
using bench::Since;
using checkpoint::CheckpointEngine;
using checkpoint::CheckpointOptions;
using checkpoint::CheckpointStore;
using checkpoint::Prompt;
using checkpoint::RetentionPolicy;
using checkpoint::Sequence;

// Forward FLOPs per position: 2 x the matrices' parameters (token embedding
// rows are a lookup, unless they also serve as the output matrix), plus, on
// attention layers, 4 x the query width per position of context (scores and
// weighted values; sliding windows are not capped: an overestimate there).
struct FlopModel {
  double per_position = 0;
  double per_context = 0;
  // Positions [a, b).
  double Range(Pos a, Pos b) const {
    const double n = b - a;
    return per_position * n + per_context * (static_cast<double>(a) + b - 1) * n / 2;
  }
};

FlopModel EstimateFlops(const ModelFile& file) {
  FlopModel f;
  const bool tied = file.FindTensor("output.weight") == nullptr;
  for (const TensorInfo* t : file.tensors()) {
    if (t->shape.size() < 2 || t->shape[1] <= 1) continue;
    if (t->name == "token_embd.weight" && !tied) continue;
    f.per_position += 2.0 * static_cast<double>(t->n_elements());
    if (t->name.ends_with(".attn_q.weight")) f.per_context += 4.0 * static_cast<double>(t->shape[1]);
  }
  return f;
}

struct MoveFigures {
  int64_t recomputed = 0, minimum = 0;
  int requests = 0;
};

struct Figures {
  int64_t prompt = 0, reused = 0, recomputed = 0, minimum = 0;
  double flops_saved = 0;
  double ttft = 0;  // prefill seconds, summed
  size_t peak_bytes = 0;
  int requests = 0;
  checkpoint::StoreStats store;
  checkpoint::EngineStats engine;
  std::map<std::string, MoveFigures> by_move;
  std::array<bench::ReasonTally, checkpoint::kCaptureReasons> tally{};
  size_t needed_peak = 0;                                // ReferenceRecorder::NeededPeak
  std::shared_ptr<const bench::ReferenceStream> stream;  // the restores, by path

  double hit_rate() const { return prompt > 0 ? static_cast<double>(reused) / prompt : 0; }
  double ratio() const { return minimum > 0 ? static_cast<double>(recomputed) / minimum : 0; }
};

Prompt BuildPrompt(const bench::WorkloadRequest& r) {
  Prompt p;
  size_t at = 0;
  for (size_t end : r.message_ends) {
    p.AddTokens(std::span<const TokenId>(r.prompt.data() + at, end - at));
    p.EndMessage();
    at = end;
  }
  p.AddTokens(std::span<const TokenId>(r.prompt.data() + at, r.prompt.size() - at));
  return p;
}

// The reply's tokens go in as a scheduler's decode steps do (Forward on the
// sequence's memory under a SequenceHold, then Append), `step` tokens per
// Forward instead of one: the reply is known in advance (the trace's), so
// teacher forcing gives the states decoding would, and Append takes the
// generation checkpoints at the same positions when `step` is their spacing.
void AbsorbReply(Backend& backend, Sequence& seq, const std::vector<TokenId>& reply, int step) {
  for (size_t at = 0; at < reply.size(); at += static_cast<size_t>(step)) {
    const std::span<const TokenId> tokens(reply.data() + at, std::min(reply.size() - at, static_cast<size_t>(step)));
    checkpoint::SequenceHold hold(seq);
    SequenceRun run;
    run.memory = seq.memory();
    run.start_pos = seq.memory()->next_pos();
    run.tokens = tokens;
    auto out = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) Die("reply", out.status());
    if (absl::Status s = hold.Append(tokens); !s.ok()) Die("append", s);
  }
}

// Runs the whole trace through a fresh store and engine; `retention`
// replaces the one options.cache_policy names when given.
Figures Replay(Backend& backend, const FlopModel& flops, const bench::Workload& w, const CheckpointOptions& options,
               std::shared_ptr<RetentionPolicy> retention) {
  checkpoint::StoreOptions so = options.store();
  if (retention != nullptr) so.retention = std::move(retention);
  auto recorder = std::make_shared<bench::ReferenceRecorder>(so.retention);
  so.retention = recorder;
  std::shared_ptr<CheckpointStore> store;
  if (options.enabled) {
    auto created = CheckpointStore::Create(so);
    if (!created.ok()) Die("store", created.status());
    store = std::move(*created);
  }
  auto engine = CheckpointEngine::Create(&backend, store, options);
  if (!engine.ok()) Die("engine", engine.status());
  // Everything computed so far (prompts and replies), for the minimum.
  auto computed = checkpoint::PrefixIndex::Create();
  if (!computed.ok()) Die("index", computed.status());
  uint64_t computed_id = 1;

  Figures f;
  std::vector<std::unique_ptr<Sequence>> sessions(static_cast<size_t>(w.options.users));
  for (const bench::WorkloadEvent& ev : w.events) {
    std::unique_ptr<Sequence>& session = sessions[static_cast<size_t>(ev.user)];
    if (ev.type == bench::WorkloadEvent::Type::kExpire) {
      session.reset();
      continue;
    }
    const bench::WorkloadRequest& r = w.requests[ev.request];
    const Prompt p = BuildPrompt(r);
    const size_t known = (*computed)->Lookup("", p.keys(), 0).matched;
    const int64_t minimum = p.positions() - p.pos_after(known);
    std::unique_ptr<Sequence> temp;
    Sequence* seq = nullptr;
    if (r.kind == bench::ClientKind::kSessionless) {
      auto s = (*engine)->NewSequence();
      if (!s.ok()) Die("sequence", s.status());
      temp = std::move(*s);
      seq = temp.get();
    } else {
      if (session == nullptr) {
        auto s = (*engine)->NewSequence();
        if (!s.ok()) Die("sequence", s.status());
        session = std::move(*s);
      }
      seq = session.get();
    }
    const auto t0 = Clock::now();
    auto result = (*engine)->Prefill(*seq, p);
    const double secs = Since(t0);
    if (!result.ok()) Die("prefill", result.status());
    const checkpoint::PrefillStats& st = result->stats;
    f.prompt += p.positions();
    f.reused += st.reused;
    f.recomputed += st.recomputed;
    f.minimum += minimum;
    f.flops_saved += flops.Range(0, st.reused);
    f.ttft += secs;
    ++f.requests;
    MoveFigures& m = f.by_move[r.move];
    m.recomputed += st.recomputed;
    m.minimum += minimum;
    ++m.requests;
    AbsorbReply(backend, *seq, r.reply, options.generation_every > 0 ? options.generation_every : 16);
    if (absl::Status s = (*engine)->EndGeneration(*seq); !s.ok()) Die("end generation", s);
    checkpoint::IndexEntry e;
    e.kind = checkpoint::EntryKind::kLive;
    e.id = computed_id++;
    (*computed)->Insert("", seq->history().keys(), e).IgnoreError();
    if (temp != nullptr) (*engine)->Park(*temp).IgnoreError();  // as the service does
  }
  sessions.clear();
  if (store != nullptr) {
    f.store = store->stats();
    f.peak_bytes = f.store.peak_ram_bytes;
  }
  f.engine = (*engine)->stats();
  f.tally = recorder->tally();
  f.needed_peak = recorder->NeededPeak();
  f.stream = std::make_shared<bench::ReferenceStream>(recorder->stream());
  return f;
}

struct ModelUnderTest {
  std::string name;
  std::unique_ptr<Backend> backend;
  FlopModel flops;
};

std::string Mib(size_t bytes) { return absl::StrCat(absl::SixDigits(bytes / 1048576.0), " MiB"); }

struct SweepRow {
  double fraction = 0;
  size_t budget = 0;
  std::vector<std::pair<std::string, Figures>> results;  // per policy, in order
};

// The criteria at one (family, budget) point, and their line.
struct Verdict {
  std::string text;
  bool compared = false;  // a baseline ran
  bool at_least = false;  // cairn >= the best baseline
  bool judged = false;    // offline ran and the budget is >= 25% of the working set
  bool within = false;    // cairn >= 90% of offline
};

struct SweepOptions {
  std::vector<double> budgets;  // fractions of the working set
  std::vector<std::string> policies;
  std::vector<double> alphas;
  bool verbose = false;  // what happened per capture reason
};

void PrintTally(const Figures& f) {
  std::printf("           ");
  for (size_t r = 0; r < checkpoint::kCaptureReasons; ++r) {
    const bench::ReasonTally& t = f.tally[r];
    if (t.added == 0) continue;
    std::printf(" %s %llu/%.1fM used %llu (%.0f pos) lost %llu missed %llu;",
                checkpoint::CaptureReasonName(static_cast<checkpoint::CaptureReason>(r)),
                static_cast<unsigned long long>(t.added), t.added_bytes / 1048576.0,
                static_cast<unsigned long long>(t.uses), t.credited, static_cast<unsigned long long>(t.removed_unused),
                static_cast<unsigned long long>(t.missed));
  }
  std::printf("\n            recomputed/minimum per move:");
  for (const auto& [move, mf] : f.by_move) {
    std::printf(" %s %lld/%lld", move.c_str(), static_cast<long long>(mf.recomputed),
                static_cast<long long>(mf.minimum));
  }
  std::printf("\n");
}

// One family: the unlimited first run (working set, reference stream), then
// every budget with every policy. Prints as it goes; returns the rows.
std::vector<SweepRow> Sweep(ModelUnderTest& m, const bench::Workload& w, const CheckpointOptions& base,
                            const SweepOptions& so, std::vector<Verdict>* verdicts) {
  CheckpointOptions unlimited = base;
  unlimited.ram_budget_bytes = size_t{64} << 30;
  const Figures all = Replay(*m.backend, m.flops, w, unlimited, nullptr);
  const auto& stream = all.stream;
  const size_t working_set = std::max<size_t>(all.needed_peak, 1);
  const ModelInfo& info = m.backend->info();
  std::printf(
      "\n%s (%s, %s): working set %s (the most bytes held at once by checkpoints still to be restored, "
      "in an unlimited store with cairn's placement; that store's peak: %s); %d requests, %lld prompt "
      "positions, minimum %lld; unlimited: hit rate %.1f%%, recomputed/minimum %.3f\n",
      m.name.c_str(), info.family.c_str(), info.arch.c_str(), Mib(working_set).c_str(), Mib(all.peak_bytes).c_str(),
      all.requests, static_cast<long long>(all.prompt), static_cast<long long>(all.minimum), 100 * all.hit_rate(),
      all.ratio());
  std::printf("  %-7s %-10s %-13s %9s %11s %10s %10s %9s %9s\n", "budget", "MiB", "policy", "hit rate", "FLOPs saved",
              "recomp/min", "peak MiB", "evicted", "rejected");
  std::vector<SweepRow> rows;
  for (double fraction : so.budgets) {
    SweepRow row;
    row.fraction = fraction;
    row.budget = std::max<size_t>(static_cast<size_t>(fraction * static_cast<double>(working_set)), 4096);
    CheckpointOptions o = base;
    o.ram_budget_bytes = row.budget;
    for (const std::string& policy : so.policies) {
      std::vector<std::string> variants;
      if (policy == "marconi") {
        for (double a : so.alphas) variants.push_back(absl::StrCat("marconi:", a));
      } else {
        variants.push_back(policy);
      }
      Figures best;
      std::string best_name;
      for (const std::string& v : variants) {
        CheckpointOptions po = o;
        std::shared_ptr<RetentionPolicy> retention;
        if (v == "offline") {
          // The placement of the unlimited run that recorded the stream.
          po.cache_policy = "cairn";
          po.budget_spacing = false;
          retention = std::make_shared<bench::OfflineRetention>(stream);
        } else {
          po.cache_policy = v;
        }
        Figures f = Replay(*m.backend, m.flops, w, po, retention);
        if (best_name.empty() || f.reused > best.reused) {
          best = f;
          best_name = v == "offline" ? "offline" : v;
        }
      }
      std::printf("  %6.0f%% %10.2f %-13s %8.1f%% %11.3g %10.3f %10.2f %9llu %9llu\n", 100 * fraction,
                  row.budget / 1048576.0, best_name.c_str(), 100 * best.hit_rate(), best.flops_saved, best.ratio(),
                  best.peak_bytes / 1048576.0, static_cast<unsigned long long>(best.store.evictions),
                  static_cast<unsigned long long>(best.store.rejected));
      if (so.verbose) PrintTally(best);
      std::fflush(stdout);
      row.results.emplace_back(best_name, best);
    }
    rows.push_back(std::move(row));
  }
  // The criteria, per budget: cairn >= the best baseline, and within
  // 10% of the offline reference from 25% of the working set up.
  for (const SweepRow& row : rows) {
    const Figures* cairn = nullptr;
    const Figures* offline = nullptr;
    double best_baseline = 0;
    std::string best_baseline_name;
    for (const auto& [name, f] : row.results) {
      if (name == "cairn")
        cairn = &f;
      else if (name == "offline")
        offline = &f;
      else if (f.hit_rate() > best_baseline)
        best_baseline = f.hit_rate(), best_baseline_name = name;
    }
    if (cairn == nullptr) continue;
    Verdict v;
    v.text = absl::StrCat(m.name, " ", absl::SixDigits(100 * row.fraction), "%: cairn ",
                          absl::SixDigits(100 * cairn->hit_rate()), "%");
    if (!best_baseline_name.empty()) {
      v.compared = true;
      v.at_least = cairn->hit_rate() >= best_baseline;
      absl::StrAppend(&v.text, v.at_least ? " >= " : " < ", best_baseline_name, " ",
                      absl::SixDigits(100 * best_baseline), "%");
    }
    if (offline != nullptr && offline->hit_rate() > 0) {
      const double share = cairn->hit_rate() / offline->hit_rate();
      v.judged = row.fraction >= 0.25;
      v.within = share >= 0.9;
      absl::StrAppend(&v.text, "; ", absl::SixDigits(100 * share), "% of offline ",
                      absl::SixDigits(100 * offline->hit_rate()), "%",
                      v.judged ? (v.within ? " (within 10%)" : " (NOT within 10%)") : "");
    }
    verdicts->push_back(std::move(v));
  }
  return rows;
}

// Plain-prompt clients only, at the given options: recomputed / minimum per move.
void NoBoundary(ModelUnderTest& m, const bench::WorkloadOptions& wo, const CheckpointOptions& options) {
  bench::WorkloadOptions plain = wo;
  plain.plain = 1.0;
  plain.sessionless = 0;
  const bench::Workload w = bench::MakeWorkload(plain);
  CheckpointOptions unspaced = options;
  unspaced.spaced_first = 0;
  CheckpointOptions before = unspaced;
  before.divergence_points = false;
  before.keep_turn_checkpoints = false;
  const Figures now = Replay(*m.backend, m.flops, w, options, nullptr);
  const Figures without_spaced = Replay(*m.backend, m.flops, w, unspaced, nullptr);
  const Figures old = Replay(*m.backend, m.flops, w, before, nullptr);
  std::printf(
      "  %-14s %8.3f (%lld / %lld; without spaced points: %.3f; without them, divergence points and kept "
      "turn checkpoints: %.3f)",
      m.name.c_str(), now.ratio(), static_cast<long long>(now.recomputed), static_cast<long long>(now.minimum),
      without_spaced.ratio(), old.ratio());
  for (const auto& [move, mf] : now.by_move) {
    std::printf("  %s %.3f", move.c_str(), mf.minimum > 0 ? static_cast<double>(mf.recomputed) / mf.minimum : 0.0);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// TTFT on a compute-dominated model: each policy at a few budgets, and with
// checkpoints off, on a smaller trace.
void Ttft(ModelUnderTest& m, const bench::WorkloadOptions& wo, const CheckpointOptions& base, const SweepOptions& so) {
  const bench::Workload w = bench::MakeWorkload(wo);
  CheckpointOptions unlimited = base;
  unlimited.ram_budget_bytes = size_t{64} << 30;
  const Figures all = Replay(*m.backend, m.flops, w, unlimited, nullptr);
  const auto& stream = all.stream;
  CheckpointOptions off = base;
  off.enabled = false;
  const Figures none = Replay(*m.backend, m.flops, w, off, nullptr);
  std::printf(
      "\nTTFT on %s (%d users, %d requests, %lld prompt positions; working set %s): mean prefill time per "
      "request; checkpoints off: %.1f ms, unlimited cairn: %.1f ms (hit rate %.1f%%)\n",
      m.name.c_str(), wo.users, all.requests, static_cast<long long>(all.prompt), Mib(all.needed_peak).c_str(),
      1e3 * none.ttft / none.requests, 1e3 * all.ttft / all.requests, 100 * all.hit_rate());
  for (double fraction : {0.1, 0.25}) {
    CheckpointOptions o = base;
    o.ram_budget_bytes = std::max<size_t>(static_cast<size_t>(fraction * static_cast<double>(all.needed_peak)), 4096);
    std::printf("  %3.0f%% (%.1f MiB):", 100 * fraction, o.ram_budget_bytes / 1048576.0);
    for (const std::string& policy : so.policies) {
      CheckpointOptions po = o;
      std::shared_ptr<RetentionPolicy> retention;
      std::string name = policy;
      if (policy == "offline") {
        po.cache_policy = "cairn";
        po.budget_spacing = false;
        retention = std::make_shared<bench::OfflineRetention>(stream);
      } else if (policy == "marconi") {
        name = po.cache_policy = absl::StrCat("marconi:", so.alphas.empty() ? 1.0 : so.alphas.front());
      } else {
        po.cache_policy = policy;
      }
      const Figures f = Replay(*m.backend, m.flops, w, po, retention);
      std::printf("  %s %.1f ms (%.1f%%)", name.c_str(), 1e3 * f.ttft / f.requests, 100 * f.hit_rate());
      std::fflush(stdout);
    }
    std::printf("\n");
  }
}

// The sweep on the trace of each seed (one point moves by a point or two
// between traces), then per family, budget and policy the mean hit rate, and
// per seed how many points meet the criteria.
void SweepSeeds(std::vector<ModelUnderTest>& models, bench::WorkloadOptions wo, const std::vector<double>& seeds,
                const CheckpointOptions& options, const SweepOptions& so) {
  // family -> budget index -> policy (Marconi's alphas as one) -> hit rates
  std::map<std::string, std::map<size_t, std::map<std::string, std::vector<double>>>> hits;
  std::vector<std::string> counts;
  for (double seed : seeds) {
    wo.seed = static_cast<uint32_t>(seed);
    const bench::Workload w = bench::MakeWorkload(wo);
    std::printf("\nseed %u: %zu requests\n", wo.seed, w.requests.size());
    std::vector<Verdict> verdicts;
    int at_least = 0, points = 0, within = 0, judged = 0;
    for (ModelUnderTest& m : models) {
      const std::vector<SweepRow> rows = Sweep(m, w, options, so, &verdicts);
      for (size_t b = 0; b < rows.size(); ++b) {
        for (const auto& [name, f] : rows[b].results) {
          hits[m.name][b][name.substr(0, name.find(':'))].push_back(100 * f.hit_rate());
        }
      }
    }
    for (const Verdict& v : verdicts) {
      points += v.compared;
      at_least += v.compared && v.at_least;
      judged += v.judged;
      within += v.judged && v.within;
    }
    counts.push_back(absl::StrCat("seed ", wo.seed, ": cairn >= the best baseline at ", at_least, " of ", points,
                                  " points; within 10% of offline at ", within, " of ", judged, " points from 25% up"));
  }
  std::printf("\nmean hit rate %% over %zu seeds, per budget (%% of the working set):", seeds.size());
  for (double b : so.budgets) std::printf(" %g%%", 100 * b);
  std::printf("\n");
  for (const auto& [family, budgets] : hits) {
    std::map<std::string, std::vector<double>> by_policy;
    for (const auto& [b, policies] : budgets) {
      for (const auto& [policy, v] : policies) {
        double sum = 0;
        for (double x : v) sum += x;
        by_policy[policy].push_back(sum / static_cast<double>(v.size()));
      }
    }
    for (const auto& [policy, means] : by_policy) {
      std::printf("  %-14s %-8s", family.c_str(), policy.c_str());
      for (double x : means) std::printf(" %6.2f", x);
      std::printf("\n");
    }
  }
  for (const std::string& c : counts) std::printf("  %s\n", c.c_str());
}

std::vector<double> ParseList(const std::string& text, double scale) {
  std::vector<double> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(piece, &v)) {
      std::fprintf(stderr, "bad number '%s'\n", std::string(piece).c_str());
      std::exit(2);
    }
    out.push_back(v * scale);
  }
  return out;
}

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  std::vector<std::string> args(argv + 1, argv + argc);
  CheckpointOptions options;
  if (absl::Status s = checkpoint::ParseCheckpointFlags(&args, &options); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  bench::WorkloadOptions wo;
  SweepOptions so;
  so.budgets = {0.02, 0.05, 0.10, 0.25, 0.50, 1.00};
  so.policies = {"cairn", "lru", "marconi", "offline"};
  so.alphas = {0.5, 2};
  std::string ttft_model = "demo-hybrid-large";
  int ttft_users = 12, threads = 1;
  std::vector<std::string> sections = {"sweep", "noboundary", "ttft"};
  std::vector<double> seeds;  // --seeds: the sweep on each trace, then the means
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&] { return bench::FlagValue(args, &i); };
    if (a == "--users")
      wo.users = std::atoi(value().c_str());
    else if (a == "--seed")
      wo.seed = static_cast<uint32_t>(std::atoi(value().c_str()));
    else if (a == "--seeds")
      seeds = ParseList(value(), 1);
    else if (a == "--budgets")
      so.budgets = ParseList(value(), 0.01);
    else if (a == "--policies")
      so.policies = absl::StrSplit(value(), ',', absl::SkipEmpty());
    else if (a == "--alphas")
      so.alphas = ParseList(value(), 1);
    else if (a == "--ttft-model")
      ttft_model = value();
    else if (a == "--ttft-users")
      ttft_users = std::atoi(value().c_str());
    else if (a == "--threads")
      threads = std::atoi(value().c_str());
    else if (a == "--verbose")
      so.verbose = true;
    else if (a == "--sections")
      sections = absl::StrSplit(value(), ',', absl::SkipEmpty());
    else if (a == "--model") {
      const std::string v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--model NAME=PATH\n");
        return 2;
      }
      files.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "pressure [--users N] [--seed N | --seeds 1,2,3] [--budgets 2,5,10,25,50,100] [--policies "
          "cairn,lru,marconi,offline]\n"
          "         [--alphas 0.5,2] [--model NAME=PATH]... [--ttft-model NAME|none] [--ttft-users N]\n"
          "         [--sections sweep,noboundary,ttft] [--threads N] [checkpoint flags]\n%s",
          checkpoint::CheckpointFlagsHelp().c_str());
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  auto has = [&sections](const char* s) { return std::find(sections.begin(), sections.end(), s) != sections.end(); };
  const std::string shared =
      std::getenv("CAIRN_SHARED_DIR") ? std::getenv("CAIRN_SHARED_DIR") : std::string(CAIRN_SOURCE_DIR) + "/../shared";
  if (files.empty()) {
    for (const char* m : {"llama", "gemma3", "mamba2", "granitehybrid", "qwen35"}) {
      files.emplace_back(m, shared + "/golden/models/" + m + ".gguf");
    }
  }
  BackendRegistry registry;
  if (absl::Status s = RegisterBuiltinBackends(registry); !s.ok()) Die("registry", s);
  BackendOptions bo;
  bo.n_threads = threads;
  auto load = [&](const std::string& name, std::shared_ptr<const ModelFile> file) -> ModelUnderTest {
    bo.name = name;
    auto b = registry.Create(file, bo);
    if (!b.ok()) Die(name, b.status());
    return ModelUnderTest{name, std::move(*b), EstimateFlops(*file)};
  };
  std::vector<ModelUnderTest> models;
  for (const auto& [name, path] : files) {
    auto f = ModelFile::Open(path);
    if (!f.ok()) Die(name, f.status());
    models.push_back(load(name, std::shared_ptr<const ModelFile>(std::move(*f))));
  }
  const bench::Workload w = bench::MakeWorkload(wo);
  int kinds[3] = {0, 0, 0};
  for (bench::ClientKind k : w.kinds) ++kinds[static_cast<int>(k)];
  std::map<std::string, int> moves;
  for (const auto& r : w.requests) ++moves[r.move];
  std::printf(
      "pressure: seed %u, %d users (%d session, %d plain-prompt, %d sessionless), %d system prompts of "
      "%d-%d tokens (Zipf %.2f), %zu requests, %d-token replies, session timeout %d ticks; moves:",
      wo.seed, wo.users, kinds[0], kinds[1], kinds[2], wo.system_prompts, wo.system_min, wo.system_max, wo.zipf,
      w.requests.size(), wo.reply, wo.session_timeout);
  for (const auto& [move, n] : moves) std::printf(" %s %d", move.c_str(), n);
  std::printf("\n");
  std::vector<Verdict> verdicts;
  if (has("sweep") && seeds.empty()) {
    for (ModelUnderTest& m : models) Sweep(m, w, options, so, &verdicts);
    std::printf("\nsummary (token hit rate; the best baseline per budget; offline = Belady-style reference):\n");
    for (const Verdict& v : verdicts) std::printf("  %s\n", v.text.c_str());
  }
  if (has("sweep") && !seeds.empty()) SweepSeeds(models, wo, seeds, options, so);
  if (has("noboundary")) {
    std::printf(
        "\nplain-prompt clients only (no message boundaries; trims, early edits, cut replies), default "
        "budget %s: recomputed / minimum, per move\n",
        Mib(options.ram_budget_bytes).c_str());
    for (ModelUnderTest& m : models) NoBoundary(m, wo, options);
  }
  if (has("ttft") && ttft_model != "none") {
    auto demo = service::BuildDemoModel(ttft_model);
    std::shared_ptr<const ModelFile> file;
    if (demo.ok()) {
      file = demo->file;
    } else {
      auto f = ModelFile::Open(ttft_model);
      if (!f.ok()) Die(ttft_model, f.status());
      file = std::shared_ptr<const ModelFile>(std::move(*f));
    }
    ModelUnderTest m = load(ttft_model, file);
    bench::WorkloadOptions small = wo;
    small.users = ttft_users;
    small.vocab = m.backend->info().n_vocab;
    Ttft(m, small, options, so);
  }
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
