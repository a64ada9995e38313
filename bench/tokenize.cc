// Tokenizer throughput on a few MB of mixed text (English prose, numbers,
// punctuation, code, accented Latin, CJK, emoji, whitespace runs), for the
// SPM vocabulary of stories260K and the Qwen3 and Llama 3 byte-level BPE
// vocabularies of ../shared/golden/tokenizer.
//
// Prints MB/s for tokenize and for streaming detokenization (one token at a
// time through StreamingDetokenizer), and, as a baseline measured in the same
// run, the MB/s of a plain UTF-8 decode of the same text (the least work any
// tokenizer does), so that ratios stay meaningful on a shared machine.
//
// usage: tokenize [--shared DIR] [--mb N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/model/detokenizer.h"
#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"
#include "backends/model/unicode.h"
#include "bench/bench_util.h"

namespace {

using cairn::bench::Best;

std::string MixedText(size_t bytes) {
  static const char* const kWords[] = {"the",
                                       "a",
                                       "little",
                                       "girl",
                                       "named",
                                       "Lily",
                                       "loved",
                                       "to",
                                       "play",
                                       "outside",
                                       "in",
                                       "park",
                                       "One",
                                       "day",
                                       "she",
                                       "found",
                                       "shiny",
                                       "red",
                                       "ball",
                                       "and",
                                       "said",
                                       "happy",
                                       "internationalization",
                                       "tokenizer",
                                       "checkpoint",
                                       "recurrent",
                                       "state",
                                       "It's",
                                       "we're",
                                       "café",
                                       "naïve",
                                       "résumé",
                                       "Ünïcödé",
                                       "straße",
                                       "Москва",
                                       "привет",
                                       "Ελληνικά",
                                       "مرحبا",
                                       "नमस्ते",
                                       "中文字符",
                                       "日本語のテキスト",
                                       "한국어",
                                       "🙂",
                                       "🚀",
                                       "👍🏽",
                                       "e-mail:",
                                       "https://example.com/a?b=c&d=e",
                                       "x=1;",
                                       "3.14159",
                                       "-42",
                                       "1,000,000",
                                       "2026",
                                       "(parentheses)",
                                       "[brackets]",
                                       "{braces}",
                                       "<angles>",
                                       "#hashtag",
                                       "@mention",
                                       "$5",
                                       "50%",
                                       "under_score",
                                       "and-dash",
                                       "\"quoted\"",
                                       "'single'",
                                       "...",
                                       "!!!",
                                       "?"};
  constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
  static const char* const kCode[] = {"int main(int argc, char** argv) {\n",
                                      "    return 0;\n",
                                      "}\n",
                                      "def f(x):\n    return x * 2\n",
                                      "\tif (a && b) { c += 1; }\n",
                                      "for (size_t i = 0; i < n; ++i) sum += v[i];\n"};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> word(0, kNumWords - 1);
  std::uniform_int_distribution<int> roll(0, 99);
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) {
    const int r = roll(rng);
    if (r < 3) {
      text += kCode[roll(rng) % 6];
    } else if (r < 8) {
      text += ".\n\n";
    } else if (r < 10) {
      text += "   ";
    } else {
      text += ' ';
    }
    text += kWords[word(rng)];
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shared = std::string(CAIRN_SOURCE_DIR) + "/../shared";
  if (const char* env = std::getenv("CAIRN_SHARED_DIR"); env && *env) shared = env;
  double mb = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--shared")
      shared = argv[i + 1];
    else if (arg == "--mb")
      mb = std::atof(argv[i + 1]);
  }
  const std::string text = MixedText(static_cast<size_t>(mb * 1e6));
  const double text_mb = static_cast<double>(text.size()) / 1e6;
  std::printf("mixed text: %.2f MB, Unicode table %s\n", text_mb, cairn::UnicodeTableVersion());

  size_t n_cpts = 0;
  const double decode_s = Best(3, [&] { n_cpts = cairn::DecodeUtf8Lenient(text).size(); });
  std::printf("baseline utf-8 decode: %8.1f MB/s (%zu codepoints)\n\n", text_mb / decode_s, n_cpts);
  std::printf("%-12s %10s %12s %12s %12s %10s\n", "vocabulary", "tokens", "tok MB/s", "detok MB/s", "tok/decode",
              "roundtrip");

  const struct {
    const char* name;
    const char* path;
  } kModels[] = {
      {"stories260K", "models/stories260K.gguf"},
      {"qwen3", "golden/tokenizer/qwen3-vocab.gguf"},
      {"llama3", "golden/tokenizer/llama3-vocab.gguf"},
  };
  int failures = 0;
  for (const auto& m : kModels) {
    auto model = cairn::ModelFile::Open(shared + "/" + m.path);
    if (!model.ok()) {
      std::printf("%-12s skipped: %s\n", m.name, std::string(model.status().message()).c_str());
      continue;
    }
    auto tok = cairn::Tokenizer::Create(**model);
    if (!tok.ok()) {
      std::printf("%-12s error: %s\n", m.name, std::string(tok.status().message()).c_str());
      ++failures;
      continue;
    }
    std::vector<cairn::TokenId> ids;
    cairn::TokenizeOptions options;
    options.add_special = false;
    const double tok_s = Best(3, [&] { ids = (*tok)->Tokenize(text, options); });
    std::string back;
    const double detok_s = Best(3, [&] {
      back.clear();
      back.reserve(text.size());
      cairn::StreamingDetokenizer detok(**tok);
      for (const cairn::TokenId id : ids) {
        if (!detok.Push(id, &back).ok()) std::abort();
      }
      detok.Flush(&back);
    });
    const bool same = back == text;
    failures += !same;
    std::printf("%-12s %10zu %12.2f %12.2f %11.1fx %10s\n", m.name, ids.size(), text_mb / tok_s, text_mb / detok_s,
                tok_s / decode_s, same ? "exact" : "DIFFERS");
  }
  return failures == 0 ? 0 : 1;
}
