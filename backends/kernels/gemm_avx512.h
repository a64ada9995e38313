// Private to gemm.cc: the AVX-512 kernels of the F32/F16 products (gemm.h),
// in gemm_avx512.cc, which is compiled with AVX-512 flags whatever
// CAIRN_NATIVE says, so one binary carries them and gemm.cc calls them only
// on a CPU that runs them (CpuRunsAvx512Float, cpu_isa.h). That file must
// therefore emit no out-of-line code a portable file could share through the
// linker (inline functions, templates, std containers): its helpers sit in
// an unnamed namespace, and buffers and threads stay in gemm.cc. The
// functions below, on plain arguments, are its only external symbols.
#ifndef CAIRN_BACKENDS_KERNELS_GEMM_AVX512_H_
#define CAIRN_BACKENDS_KERNELS_GEMM_AVX512_H_

#include <cstddef>
#include <cstdint>

namespace cairn::gemm_avx512 {

// The register block: kTokens tokens x kOuts outputs, 24 accumulators of
// 16 lanes (four per token) plus four weight vectors: 28 of the 32 zmm
// registers. Per input index: 4 vector loads, 6 broadcasts, 24 FMAs, so
// the FMA units, not the loads, set the pace. Measured at 1 thread (CPU
// time, bench/matmul): 14 x 32 ran at 0.75-0.85x sgemm, 8 x 48 at about
// the same, 6 x 64 at 0.82-0.92x with short input blocks and ~1.0x with
// the blocks below.
constexpr int kTokens = 6;
constexpr int kOuts = 64;
// At most this many inputs per block. A weight panel (kOuts x the block,
// 512 KiB) stays in L2 while every token block passes over it (more, and the
// activations streaming through L2 evict it: ffn_down, 5632 inputs, ran at
// 0.8x sgemm unblocked); each token block reads its packed activations
// (kTokens x the block) in order, which the prefetchers follow from L3.
// Long blocks matter: every block adds a pass over the partial sums and
// restarts the kernel (blocks of 256 ran at 0.8x those of 2048).
constexpr int64_t kMaxBlockIn = 2048;
// Floats of partial sums per panel group (2 MiB).
constexpr int64_t kGroupOutputFloats = 512 << 10;

// The weight matrix as the kernels read it: n_out rows of n_in F32 or F16
// (f16) weights, row_bytes apart.
struct FloatRows {
  const uint8_t* data;
  size_t row_bytes;
  int64_t n_in;
  int64_t n_out;
  bool f16;
};

// Activations packed once per product: for each block of kTokens tokens,
// input index by input index, the block's kTokens values side by side
// (tokens past the end are zero), so the kernel's broadcasts read memory in
// order. Packs token block tb of x ([n_tokens][K]) into
// xp + tb * K * kTokens.
void PackTokens(const float* x, int64_t n_tokens, int64_t K, int64_t tb, float* xp);

// y[t][o] = sum_i x[t][i] * W[o][i] for every token and the outputs of
// panels [p_begin, p_end) (kOuts rows each): xp holds every token block
// (PackTokens), wp is this thread's 64-byte aligned buffer of
// kOuts * block_in floats. Inputs go in blocks of block_in (a multiple of
// 16), panels in groups of `group` whose partial sums y keeps between
// input blocks.
void GemmPanels(const FloatRows& w, const float* xp, int64_t n_tokens, float* y, int64_t block_in, int64_t group,
                int64_t p_begin, int64_t p_end, float* wp);

// y[t][o] = W[o] . x[t] for rows [r0, r1) and every token (y:
// [n_tokens][n_out]): each row is read once per group of up to 3 tokens.
void StreamRows(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1);

}  // namespace cairn::gemm_avx512

#endif  // CAIRN_BACKENDS_KERNELS_GEMM_AVX512_H_
