#include "tools/eval_lib.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cairn {

absl::StatusOr<std::vector<TokenId>> ParseTokenList(const std::string& text) {
  std::vector<TokenId> out;
  for (absl::string_view piece : absl::StrSplit(text, absl::ByAnyChar(" \t,"), absl::SkipEmpty())) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("'", std::string(piece), "' is not a token id"));
    }
    out.push_back(id);
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<TokenId>>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open token file '", path, "'"));
  std::vector<std::vector<TokenId>> seqs;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    absl::StatusOr<std::vector<TokenId>> ids = ParseTokenList(line);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", ids.status().message()));
    }
    if (!ids->empty()) seqs.push_back(std::move(*ids));
  }
  return seqs;
}

absl::StatusOr<std::vector<SequenceLogits>> ReadLogitsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open logits file '", path, "'"));
  std::vector<SequenceLogits> out;
  for (;;) {
    int32_t hdr[2];
    if (!in.read(reinterpret_cast<char*>(hdr), sizeof hdr)) {
      if (in.gcount() == 0) break;
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated sequence header"));
    }
    if (hdr[0] < 0 || hdr[1] <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": bad sequence header"));
    SequenceLogits s;
    s.n_tokens = hdr[0];
    s.n_vocab = hdr[1];
    s.values.resize(static_cast<size_t>(s.n_tokens) * s.n_vocab);
    if (!in.read(reinterpret_cast<char*>(s.values.data()), static_cast<std::streamsize>(s.values.size() * 4))) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated logits"));
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status WriteLogitsFile(const std::string& path, const std::vector<SequenceLogits>& seqs) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  for (const SequenceLogits& s : seqs) {
    int32_t hdr[2] = {s.n_tokens, s.n_vocab};
    out.write(reinterpret_cast<const char*>(hdr), sizeof hdr);
    out.write(reinterpret_cast<const char*>(s.values.data()), static_cast<std::streamsize>(s.values.size() * 4));
  }
  if (!out) return absl::DataLossError(absl::StrCat("writing '", path, "' failed"));
  return absl::OkStatus();
}

absl::StatusOr<EvalMode> EvalMode::Parse(const std::string& text) {
  EvalMode m;
  if (text == "batch") return m;
  if (text == "step") {
    m.chunk = 1;
    return m;
  }
  if (text.rfind("chunk:", 0) == 0 && absl::SimpleAtoi(text.substr(6), &m.chunk) && m.chunk > 0) return m;
  return absl::InvalidArgumentError(absl::StrCat("mode '", text, "': expected batch, step or chunk:N (N > 0)"));
}

absl::StatusOr<SequenceLogits> EvalSequence(Backend& backend, const std::vector<TokenId>& tokens, EvalMode mode) {
  absl::StatusOr<std::unique_ptr<SequenceMemory>> mem = backend.NewSequence();
  if (!mem.ok()) return mem.status();
  SequenceLogits out;
  out.n_tokens = static_cast<int32_t>(tokens.size());
  out.n_vocab = backend.info().n_vocab;
  out.values.reserve(tokens.size() * static_cast<size_t>(out.n_vocab));
  const size_t step = mode.chunk > 0 ? static_cast<size_t>(mode.chunk) : std::max<size_t>(tokens.size(), 1);
  for (size_t begin = 0; begin < tokens.size(); begin += step) {
    const size_t n = std::min(step, tokens.size() - begin);
    std::vector<int32_t> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
    SequenceRun run;
    run.memory = mem->get();
    run.start_pos = (*mem)->next_pos();
    run.tokens = std::span<const TokenId>(tokens).subspan(begin, n);
    run.logit_rows = rows;
    absl::StatusOr<std::vector<RunLogits>> r = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!r.ok()) return r.status();
    out.values.insert(out.values.end(), (*r)[0].values.begin(), (*r)[0].values.end());
  }
  return out;
}

absl::StatusOr<std::vector<SequenceLogits>> EvalSequences(Backend& backend,
                                                          const std::vector<std::vector<TokenId>>& seqs,
                                                          EvalMode mode) {
  std::vector<SequenceLogits> out;
  out.reserve(seqs.size());
  for (const std::vector<TokenId>& tokens : seqs) {
    absl::StatusOr<SequenceLogits> l = EvalSequence(backend, tokens, mode);
    if (!l.ok()) return l.status();
    out.push_back(std::move(*l));
  }
  return out;
}

absl::StatusOr<std::vector<PromptPart>> ReadMultimodalSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open multimodal spec '", path, "'"));
  std::vector<PromptPart> parts;
  std::string line;
  int line_no = 0;
  int64_t next_row = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = absl::StrCat(path, ":", line_no, ": ");
    std::vector<std::string> words = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    PromptPart part;
    if (words[0] == "T" && words.size() >= 2) {
      for (size_t i = 1; i < words.size(); ++i) {
        TokenId id;
        if (!absl::SimpleAtoi(words[i], &id)) {
          return absl::InvalidArgumentError(where + "'" + words[i] + "' is not a token id");
        }
        part.tokens.push_back(id);
      }
    } else if (words[0] == "I" && words.size() == 3) {
      if (!absl::SimpleAtoi(words[1], &part.nx) || !absl::SimpleAtoi(words[2], &part.ny) || part.nx <= 0 ||
          part.ny <= 0 || part.nx > (1 << 15) || part.ny > (1 << 15)) {
        return absl::InvalidArgumentError(where + "expected 'I nx ny' with positive sizes");
      }
      part.first_row = next_row;
      next_row += static_cast<int64_t>(part.nx) * part.ny;
    } else {
      return absl::InvalidArgumentError(where + "expected 'T id ...' or 'I nx ny'");
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

absl::StatusOr<std::vector<float>> ReadEmbeddingsFile(const std::string& path, int32_t n_embd) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open embeddings file '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t row_bytes = static_cast<size_t>(n_embd) * sizeof(float);
  if (n_embd <= 0 || bytes.size() % row_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.size(), " bytes is not a whole number of ", n_embd, "-float rows"));
  }
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

absl::StatusOr<SequenceLogits> EvalMultimodal(Backend& backend, const std::vector<PromptPart>& parts,
                                              const std::vector<float>& embeddings) {
  const int64_t n_embd = backend.info().n_embd;
  absl::StatusOr<std::unique_ptr<SequenceMemory>> mem = backend.NewSequence();
  if (!mem.ok()) return mem.status();
  SequenceLogits out;
  out.n_vocab = backend.info().n_vocab;
  for (const PromptPart& part : parts) {
    SequenceRun run;
    run.memory = mem->get();
    run.start_pos = (*mem)->next_pos();
    EmbeddingChunk chunk;
    int64_t n = static_cast<int64_t>(part.tokens.size());
    if (part.tokens.empty()) {
      n = static_cast<int64_t>(part.nx) * part.ny;
      if ((part.first_row + n) * n_embd > static_cast<int64_t>(embeddings.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", part.nx, " x ", part.ny, " needs embedding rows up to ", part.first_row + n,
                         "; the file has ", static_cast<int64_t>(embeddings.size()) / n_embd));
      }
      chunk.rows = embeddings.data() + part.first_row * n_embd;
      chunk.nx = part.nx;
      chunk.ny = part.ny;
      run.chunk = &chunk;
    } else {
      run.tokens = part.tokens;
    }
    std::vector<int32_t> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
    run.logit_rows = rows;
    absl::StatusOr<std::vector<RunLogits>> r = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!r.ok()) return r.status();
    out.values.insert(out.values.end(), (*r)[0].values.begin(), (*r)[0].values.end());
    out.n_tokens += static_cast<int32_t>(n);
  }
  return out;
}

int32_t Argmax(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

absl::StatusOr<std::vector<TokenId>> GenerateGreedy(Backend& backend, const std::vector<TokenId>& prompt, int32_t n) {
  if (prompt.empty()) return absl::InvalidArgumentError("greedy generation needs a non-empty prompt");
  absl::StatusOr<std::unique_ptr<SequenceMemory>> mem = backend.NewSequence();
  if (!mem.ok()) return mem.status();
  std::vector<TokenId> out;
  std::vector<TokenId> feed = prompt;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t last = static_cast<int32_t>(feed.size()) - 1;
    SequenceRun run;
    run.memory = mem->get();
    run.start_pos = (*mem)->next_pos();
    run.tokens = feed;
    run.logit_rows = std::span<const int32_t>(&last, 1);
    absl::StatusOr<std::vector<RunLogits>> r = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!r.ok()) return r.status();
    const TokenId next = Argmax((*r)[0].values.data(), (*r)[0].n_vocab);
    out.push_back(next);
    feed.assign(1, next);
  }
  return out;
}

namespace {

struct Accum {
  double sum = 0, sum_sq = 0, max_abs = 0;
  int64_t count = 0, rows = 0, agree = 0;
  std::vector<double> disagreeing_gaps;  // reference top minus reference at got's argmax
};

absl::Status Accumulate(const SequenceLogits& got, const SequenceLogits& ref, Accum& a) {
  if (got.n_tokens != ref.n_tokens || got.n_vocab != ref.n_vocab || got.values.size() != ref.values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("logits shape ", got.n_tokens, "x", got.n_vocab,
                                                   " differs from the reference's ", ref.n_tokens, "x", ref.n_vocab));
  }
  for (size_t i = 0; i < ref.values.size(); ++i) {
    a.sum += ref.values[i];
    a.sum_sq += static_cast<double>(ref.values[i]) * ref.values[i];
    a.max_abs = std::max(a.max_abs, std::fabs(static_cast<double>(got.values[i]) - ref.values[i]));
  }
  a.count += static_cast<int64_t>(ref.values.size());
  for (int32_t t = 0; t < ref.n_tokens; ++t) {
    ++a.rows;
    const int32_t got_top = Argmax(got.row(t), got.n_vocab);
    const int32_t ref_top = Argmax(ref.row(t), ref.n_vocab);
    if (got_top == ref_top) {
      ++a.agree;
    } else {
      a.disagreeing_gaps.push_back(static_cast<double>(ref.row(t)[ref_top]) - ref.row(t)[got_top]);
    }
  }
  return absl::OkStatus();
}

LogitsComparison Finish(const Accum& a) {
  LogitsComparison c;
  c.max_abs_diff = a.max_abs;
  const double mean = a.count ? a.sum / a.count : 0;
  c.ref_std = a.count ? std::sqrt(std::max(0.0, a.sum_sq / a.count - mean * mean)) : 0;
  c.max_rel = c.ref_std > 0 ? c.max_abs_diff / c.ref_std : c.max_abs_diff;
  c.rows = a.rows;
  c.argmax_agree = a.agree;
  for (double gap : a.disagreeing_gaps) {
    if (gap <= kNearTieFraction * c.ref_std) ++c.argmax_near_tie;
  }
  return c;
}

}  // namespace

absl::StatusOr<LogitsComparison> CompareLogits(const SequenceLogits& got, const SequenceLogits& ref) {
  Accum a;
  if (absl::Status s = Accumulate(got, ref, a); !s.ok()) return s;
  return Finish(a);
}

absl::StatusOr<LogitsComparison> CompareAll(const std::vector<SequenceLogits>& got,
                                            const std::vector<SequenceLogits>& ref) {
  if (got.size() != ref.size()) {
    return absl::InvalidArgumentError(absl::StrCat(got.size(), " sequences against ", ref.size(), " in the reference"));
  }
  Accum a;
  for (size_t i = 0; i < got.size(); ++i) {
    if (absl::Status s = Accumulate(got[i], ref[i], a); !s.ok()) return s;
  }
  return Finish(a);
}

}  // namespace cairn
