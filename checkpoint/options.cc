#include "checkpoint/options.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cairn::checkpoint {

PolicyOptions CheckpointOptions::policy() const {
  PolicyOptions p;
  p.enabled = enabled;
  p.every_n = every_n;
  p.tail_every = tail_every;
  p.generation_every = generation_every;
  p.spaced_first = spaced_first;
  p.min_branch_preserve = min_branch_preserve;
  p.placement = cache_policy.starts_with("marconi") ? Placement::kMarconi : Placement::kCairn;
  p.divergence_points = divergence_points;
  p.keep_turn_checkpoints = keep_turn_checkpoints;
  p.budget_spacing = budget_spacing;
  return p;
}

StoreOptions CheckpointOptions::store() const {
  StoreOptions s;
  s.ram_budget_bytes = ram_budget_bytes;
  s.disk_dir = disk_dir;
  s.disk_budget_bytes = disk_dir.empty() ? 0 : disk_budget_bytes;
  // ApplyCheckpointFlag validated the name; a bad one set in code falls back
  // to the default (and CheckpointEngine::Create rejects it).
  absl::StatusOr<std::shared_ptr<RetentionPolicy>> retention = MakeRetention(cache_policy);
  if (retention.ok()) s.retention = std::move(*retention);
  return s;
}

absl::StatusOr<size_t> ParseByteSize(std::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(std::string(text)));
  size_t split = 0;
  while (split < t.size() && (absl::ascii_isdigit(t[split]) || t[split] == '.')) ++split;
  std::string number = t.substr(0, split);
  std::string unit = t.substr(split);
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !(value >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("bad byte size '", std::string(text), "'"));
  }
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1024.0;
  else if (unit == "m" || unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  else
    return absl::InvalidArgumentError(absl::StrCat("bad byte size unit in '", std::string(text), "'"));
  double bytes = std::floor(value * mult);
  if (bytes > 9.0e18) return absl::InvalidArgumentError(absl::StrCat("byte size too large '", std::string(text), "'"));
  return static_cast<size_t>(bytes);
}

namespace {
absl::StatusOr<Pos> ParseCount(std::string_view name, std::string_view value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(std::string(value), &v) || v < 0 || v > std::numeric_limits<Pos>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", std::string(name), " needs a count >= 0, got '", std::string(value), "'"));
  }
  return static_cast<Pos>(v);
}
}  // namespace

absl::StatusOr<bool> ApplyCheckpointFlag(std::string_view arg, CheckpointOptions* options) {
  if (!arg.starts_with("--")) return false;
  arg.remove_prefix(2);
  size_t eq = arg.find('=');
  std::string_view name = arg.substr(0, eq);
  const bool has_value = eq != std::string_view::npos;
  std::string_view value = has_value ? arg.substr(eq + 1) : std::string_view();
  auto need_value = [&]() -> absl::Status {
    if (!has_value) return absl::InvalidArgumentError(absl::StrCat("--", std::string(name), " needs =VALUE"));
    return absl::OkStatus();
  };
  if (name == "checkpoints") {
    std::string v = absl::AsciiStrToLower(std::string(value));
    if (!has_value || v == "on" || v == "true" || v == "1")
      options->enabled = true;
    else if (v == "off" || v == "false" || v == "0")
      options->enabled = false;
    else
      return absl::InvalidArgumentError(absl::StrCat("--checkpoints=on|off, got '", std::string(value), "'"));
    return true;
  }
  if (name == "checkpoint-ram" || name == "checkpoint-disk-budget") {
    if (auto s = need_value(); !s.ok()) return s;
    absl::StatusOr<size_t> bytes = ParseByteSize(value);
    if (!bytes.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--", std::string(name), ": ", std::string(bytes.status().message())));
    if (name == "checkpoint-ram") {
      if (*bytes == 0) return absl::InvalidArgumentError("--checkpoint-ram must be > 0 (use --checkpoints=off)");
      options->ram_budget_bytes = *bytes;
    } else {
      options->disk_budget_bytes = *bytes;
    }
    return true;
  }
  if (name == "checkpoint-disk-dir") {
    if (auto s = need_value(); !s.ok()) return s;
    options->disk_dir = std::string(value);
    return true;
  }
  if (name == "checkpoint-policy") {
    if (auto s = need_value(); !s.ok()) return s;
    if (absl::StatusOr<std::shared_ptr<RetentionPolicy>> r = MakeRetention(std::string(value)); !r.ok()) {
      return r.status();
    }
    options->cache_policy = std::string(value);
    return true;
  }
  if (name == "checkpoint-every" || name == "checkpoint-branch-min" || name == "prefill-chunk" ||
      name == "checkpoint-tail-every" || name == "checkpoint-generation-every" || name == "checkpoint-spaced-first") {
    if (auto s = need_value(); !s.ok()) return s;
    absl::StatusOr<Pos> n = ParseCount(name, value);
    if (!n.ok()) return n.status();
    if (name == "checkpoint-every")
      options->every_n = *n;
    else if (name == "checkpoint-tail-every")
      options->tail_every = *n;
    else if (name == "checkpoint-generation-every")
      options->generation_every = *n;
    else if (name == "checkpoint-spaced-first")
      options->spaced_first = *n;
    else if (name == "checkpoint-branch-min")
      options->min_branch_preserve = *n;
    else {
      if (*n == 0) return absl::InvalidArgumentError("--prefill-chunk must be > 0");
      options->prefill_chunk = *n;
    }
    return true;
  }
  return false;
}

absl::Status ParseCheckpointFlags(std::vector<std::string>* args, CheckpointOptions* options) {
  std::vector<std::string> rest;
  for (const std::string& a : *args) {
    absl::StatusOr<bool> used = ApplyCheckpointFlag(a, options);
    if (!used.ok()) return used.status();
    if (!*used) rest.push_back(a);
  }
  *args = std::move(rest);
  return absl::OkStatus();
}

std::string CheckpointFlagsHelp() {
  CheckpointOptions d;
  return absl::StrCat(
      "  --checkpoints=on|off         prompt-reuse checkpoints (default on; off = baseline)\n",
      "  --checkpoint-ram=SIZE        RAM for checkpoints, all models (default ", d.ram_budget_bytes >> 30, "GiB)\n",
      "  --checkpoint-disk-dir=PATH   disk tier for evicted checkpoints (default none)\n",
      "  --checkpoint-disk-budget=SIZE  bytes on the disk tier (default ", d.disk_budget_bytes >> 30, "GiB)\n",
      "  --checkpoint-every=N         positions between checkpoints in long prompts (default ", d.every_n,
      ", 0 = off;\n", "                               best a multiple of --prefill-chunk)\n",
      "  --checkpoint-tail-every=N    positions between checkpoints in a prompt's last message (default ", d.tail_every,
      ", 0 = off)\n", "  --checkpoint-generation-every=N  positions between checkpoints inside a reply (default ",
      d.generation_every, ", 0 = off)\n",
      "  --checkpoint-spaced-first=N  in a prompt without message boundaries, checkpoints N positions apart from\n",
      "                               its start, then an eighth of the position apart (default ", d.spaced_first,
      ", 0 = off)\n", "  --checkpoint-branch-min=N    keep an abandoned branch of >= N positions (default ",
      d.min_branch_preserve, ", 0 = off)\n",
      "  --prefill-chunk=N            most prompt tokens per forward call (default ", d.prefill_chunk, ")\n",
      "  --checkpoint-policy=NAME     which checkpoints stay under the RAM budget: cairn (default), or the\n",
      "                               baselines lru, marconi[:ALPHA] (Marconi's placement and eviction)\n");
}

}  // namespace cairn::checkpoint
