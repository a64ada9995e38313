// Fuzzes the tokenizers with the text clients send: any bytes must tokenize
// into ids of the vocabulary, and the properties the service relies on must
// hold on every input:
//  - TokenizeParts over a split of the text, with no part parsing special
//    tokens, equals Tokenize of the whole text (the session history and the
//    prefix index depend on it), and its part starts are ordered and in
//    range;
//  - byte-level BPE is lossless on valid UTF-8: the pieces of the ids are
//    the text's bytes;
//  - streaming detokenization always yields valid UTF-8, equal to the text
//    for BPE when the text is valid UTF-8, and refuses an id outside the
//    vocabulary without changing its state.
// Vocabularies: stories260K (SPM), qwen3 and llama3 (BPE) from ../shared
// (CAIRN_SHARED_DIR overrides); the first input byte picks one, the second
// the options and the split points.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/model/detokenizer.h"
#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"
#include "backends/model/unicode.h"

namespace {

struct Vocab {
  std::unique_ptr<cairn::ModelFile> file;
  std::unique_ptr<cairn::Tokenizer> tokenizer;
};

std::vector<Vocab>* LoadVocabs() {
  const char* env = std::getenv("CAIRN_SHARED_DIR");
  const std::string shared = env != nullptr ? env : "../shared";
  auto* vocabs = new std::vector<Vocab>();
  for (const char* rel :
       {"/models/stories260K.gguf", "/golden/tokenizer/qwen3-vocab.gguf", "/golden/tokenizer/llama3-vocab.gguf"}) {
    auto file = cairn::ModelFile::Open(shared + rel);
    if (!file.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s (set CAIRN_SHARED_DIR)\n", file.status().ToString().c_str());
      std::exit(1);
    }
    auto tok = cairn::Tokenizer::Create(**file);
    if (!tok.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s: %s\n", rel, tok.status().ToString().c_str());
      std::exit(1);
    }
    vocabs->push_back(Vocab{std::move(*file), std::move(*tok)});
  }
  return vocabs;
}

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

void CheckIds(const cairn::Tokenizer& tok, const std::vector<cairn::TokenId>& ids) {
  for (cairn::TokenId id : ids) Require(id >= 0 && id < tok.n_vocab(), "token id outside the vocabulary");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<Vocab>* vocabs = LoadVocabs();
  if (size < 2) return 0;
  const cairn::Tokenizer& tok = *(*vocabs)[data[0] % vocabs->size()].tokenizer;
  const uint8_t flags = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool bpe = tok.kind() == cairn::TokenizerKind::kBpe;

  cairn::TokenizeOptions options;
  options.add_special = (flags & 1) != 0;
  options.parse_special = (flags & 2) != 0;
  const std::vector<cairn::TokenId> ids = tok.Tokenize(text, options);
  CheckIds(tok, ids);

  // Parts: the text cut at two points the flags choose; none parses special
  // tokens, so the result is Tokenize's with parse_special off.
  const size_t cut1 = text.empty() ? 0 : (flags >> 2) % (text.size() + 1);
  const size_t cut2 = cut1 + (text.size() - cut1) / 2;
  const cairn::TextPart parts[] = {
      {text.substr(0, cut1), false}, {text.substr(cut1, cut2 - cut1), false}, {text.substr(cut2), false}};
  std::vector<size_t> starts;
  const std::vector<cairn::TokenId> by_parts = tok.TokenizeParts(parts, options.add_special, &starts);
  cairn::TokenizeOptions plain = options;
  plain.parse_special = false;
  const std::vector<cairn::TokenId> whole = options.parse_special ? tok.Tokenize(text, plain) : ids;
  Require(by_parts == whole, "TokenizeParts differs from Tokenize of the whole text");
  Require(starts.size() == 3, "one start per part");
  for (size_t i = 0; i < starts.size(); ++i) {
    Require(starts[i] <= by_parts.size(), "part start beyond the ids");
    Require(i == 0 || starts[i] >= starts[i - 1], "part starts out of order");
  }

  // Byte-level BPE loses nothing of valid UTF-8: the pieces are the text's
  // bytes. (Invalid bytes become U+FFFD first, as in llama.cpp.)
  const bool valid_utf8 = cairn::ValidUtf8PrefixLength(text) == text.size();
  cairn::TokenizeOptions bare;
  bare.add_special = false;
  const std::vector<cairn::TokenId> bare_ids = bpe ? tok.Tokenize(text, bare) : std::vector<cairn::TokenId>();
  if (bpe && valid_utf8) {
    std::string pieces;
    for (cairn::TokenId id : bare_ids) pieces += tok.TokenPiece(id, false);
    Require(pieces == text, "BPE pieces differ from the text");
  }

  // Streaming detokenization: valid UTF-8 always; the text itself for BPE
  // when the text is valid UTF-8. A bad id is refused and changes nothing.
  cairn::StreamingDetokenizer detok(tok);
  std::string out;
  const std::vector<cairn::TokenId>& stream = bpe ? bare_ids : ids;
  for (size_t i = 0; i < stream.size(); ++i) {
    if (i == stream.size() / 2) {
      const size_t before = out.size(), pending = detok.pending_bytes();
      Require(!detok.Push(tok.n_vocab(), &out).ok(), "an id beyond the vocabulary is refused");
      Require(out.size() == before && detok.pending_bytes() == pending, "a refused id changes nothing");
    }
    Require(detok.Push(stream[i], &out).ok(), "an id of the vocabulary detokenizes");
  }
  detok.Flush(&out);
  Require(cairn::ValidUtf8PrefixLength(out) == out.size(), "detokenized text is valid UTF-8");
  if (bpe && valid_utf8) {
    Require(out == text, "BPE detokenization differs from valid UTF-8 text");
  }
  return 0;
}
