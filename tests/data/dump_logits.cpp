// Reference logits from llama.cpp's libllama, in the golden format of
// ../shared/golden (see its README): for each token sequence of TOKENS,
// int32 n_tokens, int32 n_vocab, float32 logits[n_tokens][n_vocab].
//
// Not part of cairn's build (cairn never needs llama.cpp). Built against a
// llama.cpp build, e.g. the snapshot the README of this folder names:
//   g++ -O2 -std=c++17 -I$LLAMA/include -I$LLAMA/ggml/include dump_logits.cpp \
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin -o dump_logits
//   ./dump_logits MODEL.gguf TOKENS.txt OUT.bin [batch|step]
// batch decodes each sequence as one batch, step one token at a time: the
// difference of the two is the reference's own noise floor. F32 K/V cache,
// flash attention off, one sequence per context.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: dump_logits MODEL TOKENS OUT [batch|step]\n");
    return 2;
  }
  const bool step = argc > 4 && std::string(argv[4]) == "step";
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  std::ifstream in(argv[2]);
  std::ofstream out(argv[3], std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<llama_token> toks;
    for (llama_token t; ss >> t;) toks.push_back(t);
    if (toks.empty()) continue;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) return 1;
    const int n = static_cast<int>(toks.size());
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
    const int per = step ? 1 : n;
    for (int i0 = 0; i0 < n; i0 += per) {
      const int m = std::min(per, n - i0);
      llama_batch b = llama_batch_init(m, 0, 1);
      for (int i = 0; i < m; ++i) {
        b.token[i] = toks[i0 + i];
        b.pos[i] = i0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
      }
      b.n_tokens = m;
      if (llama_decode(ctx, b) != 0) return 1;
      for (int i = 0; i < m; ++i) {
        std::memcpy(&logits[static_cast<size_t>(i0 + i) * n_vocab], llama_get_logits_ith(ctx, i),
                    sizeof(float) * n_vocab);
      }
      llama_batch_free(b);
    }
    const int32_t header[2] = {n, n_vocab};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
    llama_free(ctx);
  }
  llama_model_free(model);
  return 0;
}
