// cairn-tokenize --model FILE --in TEXTS --out IDS [--parse-special] [--no-add-special]
//                [--pre NAME]
//
// Tokenizes one text per line of TEXTS with the vocabulary of a GGUF file and
// writes one line of space-separated ids per text to IDS. In TEXTS, "\n",
// "\t" and "\\" stand for a newline, a tab and a backslash (the format of
// ../shared/golden/tokenizer; "\r" too, for a carriage return). BOS/EOS are
// added as the vocabulary asks unless --no-add-special; --parse-special
// matches special tokens' text.
// --pre replaces the file's BPE pre-tokenizer (tokenizer.ggml.pre) by NAME.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"

namespace {

constexpr std::string_view kUsage =
    "usage: cairn-tokenize --model FILE --in TEXTS --out IDS [--parse-special] "
    "[--no-add-special] [--pre NAME]\n";

absl::StatusOr<std::string> Unescape(std::string_view line, int line_no) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out.push_back(line[i]);
      continue;
    }
    if (i + 1 == line.size()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": trailing backslash"));
    }
    const char c = line[++i];
    if (c == 'n')
      out.push_back('\n');
    else if (c == 't')
      out.push_back('\t');
    else if (c == 'r')
      out.push_back('\r');
    else if (c == '\\')
      out.push_back('\\');
    else
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": unknown escape \\", std::string(1, c)));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, in_path, out_path, pre;
  cairn::TokenizeOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) return false;
      *dst = argv[++i];
      return true;
    };
    bool ok = true;
    if (arg == "--model")
      ok = value(&model_path);
    else if (arg == "--in")
      ok = value(&in_path);
    else if (arg == "--out")
      ok = value(&out_path);
    else if (arg == "--pre")
      ok = value(&pre);
    else if (arg == "--parse-special")
      options.parse_special = true;
    else if (arg == "--no-add-special")
      options.add_special = false;
    else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "cairn-tokenize: bad argument '" << arg << "'\n" << kUsage;
      return 2;
    }
  }
  if (model_path.empty() || in_path.empty() || out_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }

  auto model = cairn::ModelFile::Open(model_path);
  if (!model.ok()) {
    std::cerr << "cairn-tokenize: " << model.status() << "\n";
    return 1;
  }
  cairn::Metadata metadata = (*model)->metadata();
  if (!pre.empty()) {
    metadata.Set("tokenizer.ggml.pre", cairn::MetadataValue::FromScalar(cairn::GgufValueType::kString, pre));
  }
  auto tokenizer = cairn::Tokenizer::FromMetadata(metadata);
  if (!tokenizer.ok()) {
    std::cerr << "cairn-tokenize: " << tokenizer.status() << "\n";
    return 1;
  }
  std::ifstream in(in_path, std::ios::binary);
  if (!in) {
    std::cerr << "cairn-tokenize: cannot open " << in_path << "\n";
    return 1;
  }
  std::ostringstream result;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto text = Unescape(line, line_no);
    if (!text.ok()) {
      std::cerr << "cairn-tokenize: " << in_path << ": " << text.status().message() << "\n";
      return 1;
    }
    result << absl::StrJoin((*tokenizer)->Tokenize(*text, options), " ") << "\n";
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out << result.str();
  out.close();
  if (!out) {
    std::cerr << "cairn-tokenize: cannot write " << out_path << "\n";
    return 1;
  }
  return 0;
}
