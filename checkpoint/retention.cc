#include "checkpoint/retention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cairn::checkpoint {

size_t RetentionPolicy::ChooseVictim(std::span<const RetentionFacts> candidates, const RetentionClock& now) const {
  size_t best = 0;
  double worst = Score(candidates[0], now);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double s = Score(candidates[i], now);
    if (s < worst || (s == worst && candidates[i].last_use.tick < candidates[best].last_use.tick)) {
      best = i;
      worst = s;
    }
  }
  return best;
}

bool RetentionPolicy::Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
                            const RetentionClock& now) const {
  (void)incoming;
  (void)victims;
  (void)now;
  return true;
}

bool OutscoresVictims(const RetentionPolicy& policy, const RetentionFacts& incoming,
                      std::span<const RetentionFacts> victims, const RetentionClock& now) {
  const double mine = policy.Score(incoming, now);
  for (const RetentionFacts& v : victims) {
    if (policy.Score(v, now) > mine) return false;
  }
  return true;
}

// ---- ForecastRetention ----

namespace {
// Each new outcome of a kind weighs this much more than the one before: the
// forecast follows the last thousand or so checkpoints of a kind.
constexpr double kForget = 0.999;
// Checkpoints of a kind seen at an idle age or older before the kind's own
// outcomes count as much as those of all kinds together.
constexpr double kKindPrior = 2;
// The reuse chance assumed where nothing is known at all.
constexpr double kBlindChance = 0.5;
// Restores a kind needs before its measured saving counts as much as a
// checkpoint's own cost.
constexpr double kSavingPrior = 2;

void Decay(std::array<double, 24>& a) {
  for (double& x : a) x *= kForget;
}
// Prompts from the start of idle-age bucket 0 to the middle of bucket b
// (bucket b > 0 holds ages 2^(b-1) .. 2^b - 1).
double BucketMiddle(int b) { return b == 0 ? 0 : 0.75 * std::ldexp(1.0, b) - 0.5; }
}  // namespace

size_t ForecastRetention::Kind(const RetentionFacts& e) {
  const size_t reason = std::min<size_t>(static_cast<size_t>(e.reason), kCaptureReasons - 1);
  const size_t place = e.branches <= 0 ? 0 : (e.branches == 1 ? 1 : 2);
  const size_t full = e.scope == SnapshotScope::kFull ? 1 : 0;
  return (((reason * 2 + (e.stale ? 1 : 0)) * 2 + (e.uses > 0 ? 1 : 0)) * 3 + place) * 2 + full;
}

int ForecastRetention::AgeBucket(uint64_t idle) {
  if (idle == 0) return 0;
  return std::min(kAges - 1, 1 + static_cast<int>(std::log2(static_cast<double>(idle))));
}

ForecastRetention::Forecast ForecastRetention::Predict(const RetentionFacts& e, const RetentionClock& now) const {
  const uint64_t idle = now.request - std::min(now.request, e.last_use.request);
  const Tally& t = tally_[Kind(e)];
  // Over the checkpoints of the kind (and of all kinds) that stayed idle at
  // least this long: their uses, how many they were, and the prompts each
  // stayed on from this age until it was used or left.
  double uses = 0, seen = 0, stay = 0, uses_all = 0, seen_all = 0, stay_all = 0;
  for (int b = AgeBucket(idle); b < kAges; ++b) {
    const double rest = std::max(BucketMiddle(b) - static_cast<double>(idle), 0.5);
    uses += t.used[b];
    seen += t.used[b] + t.left[b];
    stay += (t.used[b] + t.left[b]) * rest;
    uses_all += all_.used[b];
    seen_all += all_.used[b] + all_.left[b];
    stay_all += (all_.used[b] + all_.left[b]) * rest;
  }
  Forecast f;
  if (seen_all <= 0) {
    // Nothing known this late (a fresh store): the least recently used goes first.
    f.chance = kBlindChance;
    f.stay = 1 + static_cast<double>(idle);
    return f;
  }
  // The kind's own outcomes, plus kKindPrior average ones of all kinds.
  f.chance = (uses + kKindPrior * uses_all / seen_all) / (seen + kKindPrior);
  f.stay = (stay + kKindPrior * stay_all / seen_all) / (seen + kKindPrior);
  return f;
}

double ForecastRetention::Saving(const RetentionFacts& e) const {
  const Tally& t = tally_[Kind(e)];
  const double measured = t.at > 0 ? t.saved / t.at * e.pos : 0;
  return (t.credits * measured + kSavingPrior * e.cost) / (t.credits + kSavingPrior);
}

double ForecastRetention::Score(const RetentionFacts& e, const RetentionClock& now) const {
  const Forecast f = Predict(e, now);
  const double density = std::max(f.chance, 1e-9) * std::max(Saving(e), 1e-9) /
                         (static_cast<double>(std::max<size_t>(e.bytes, 1)) * std::max(f.stay, 0.5));
  return std::log2(density);
}

bool ForecastRetention::Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
                              const RetentionClock& now) const {
  // Value per byte against the byte-weighted mean of what would go (Score
  // is log2 of it). Requiring it to beat every victim refused large full
  // snapshots whenever one small victim among dozens was worth a little
  // more; a burst of unlikely checkpoints still cannot flush likely ones.
  double value = 0, bytes = 0;
  for (const RetentionFacts& v : victims) {
    value += std::exp2(Score(v, now)) * static_cast<double>(v.bytes);
    bytes += static_cast<double>(v.bytes);
  }
  return bytes <= 0 || std::exp2(Score(incoming, now)) * bytes >= value;
}

void ForecastRetention::Count(size_t kind, bool used, uint64_t idle) {
  const int b = AgeBucket(idle);
  for (Tally* x : {&tally_[kind], &all_}) {
    Decay(x->used);
    Decay(x->left);
    (used ? x->used : x->left)[b] += 1;
  }
}

void ForecastRetention::Credit(size_t kind, double saved, Pos pos) {
  Tally& t = tally_[kind];
  t.credits = t.credits * kForget + 1;
  t.saved = t.saved * kForget + saved;
  t.at = t.at * kForget + pos;
}

void ForecastRetention::Observe(RetentionEvent event, const RetentionFacts& e, const RetentionClock& now) {
  const uint64_t idle = now.request - std::min(now.request, e.last_use.request);
  switch (event) {
    case RetentionEvent::kCredited:
      Credit(Kind(e), e.saved, e.pos);
      break;
    case RetentionEvent::kUsed:
      Count(Kind(e), true, idle);
      break;
    case RetentionEvent::kMissed:  // as if it had stayed until now
      Count(Kind(e), true, idle);
      break;
    case RetentionEvent::kRemoved:
      if (!e.remembered) Count(Kind(e), false, idle);  // else kMissed or kForgotten tells
      break;
    case RetentionEvent::kForgotten:
      Count(Kind(e), false, idle);
      break;
    case RetentionEvent::kAdded:
    case RetentionEvent::kEvicted:
    case RetentionEvent::kRefused:
      break;
  }
}

// ---- LruRetention ----

double LruRetention::Score(const RetentionFacts& e, const RetentionClock& now) const {
  (void)now;
  return static_cast<double>(e.last_use.tick);
}

// ---- MarconiRetention ----

namespace {
double MarconiRecency(const RetentionFacts& e, const RetentionClock& now) {
  return 1.0 / static_cast<double>(now.tick - std::min(now.tick, e.last_use.tick) + 1);
}
double FlopEfficiency(const RetentionFacts& e) { return e.cost / static_cast<double>(std::max<size_t>(e.bytes, 1)); }
// Min-max normalization to [0, 1]; all ones when the values are equal (as
// Marconi's artifact does).
std::vector<double> Normalized(std::vector<double> v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double a = *lo, b = *hi;
  for (double& x : v) x = b > a ? (x - a) / (b - a) : 1.0;
  return v;
}
}  // namespace

std::string MarconiRetention::name() const { return absl::StrCat("marconi:", alpha_); }

double MarconiRetention::Score(const RetentionFacts& e, const RetentionClock& now) const {
  return MarconiRecency(e, now) + alpha_ * FlopEfficiency(e);
}

size_t MarconiRetention::ChooseVictim(std::span<const RetentionFacts> candidates, const RetentionClock& now) const {
  std::vector<size_t> eligible;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].branches <= 1) eligible.push_back(i);
  }
  if (eligible.empty()) {  // every candidate is a branch point: the budget still binds
    for (size_t i = 0; i < candidates.size(); ++i) eligible.push_back(i);
  }
  std::vector<double> recency, efficiency;
  for (size_t i : eligible) {
    recency.push_back(MarconiRecency(candidates[i], now));
    efficiency.push_back(FlopEfficiency(candidates[i]));
  }
  recency = Normalized(std::move(recency));
  efficiency = Normalized(std::move(efficiency));
  size_t best = 0;
  for (size_t k = 1; k < eligible.size(); ++k) {
    const double u = recency[k] + alpha_ * efficiency[k];
    const double b = recency[best] + alpha_ * efficiency[best];
    if (u < b) best = k;
  }
  return eligible[best];
}

absl::StatusOr<std::shared_ptr<RetentionPolicy>> MakeRetention(const std::string& name) {
  if (name == "cairn") return std::make_shared<ForecastRetention>();
  if (name == "lru") return std::make_shared<LruRetention>();
  if (name == "marconi") return std::make_shared<MarconiRetention>();
  if (name.starts_with("marconi:")) {
    double alpha = 0;
    if (absl::SimpleAtod(name.substr(8), &alpha) && alpha >= 0) {
      return std::make_shared<MarconiRetention>(alpha);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown checkpoint retention policy '", name, "' (cairn, lru, marconi, marconi:ALPHA)"));
}

}  // namespace cairn::checkpoint
