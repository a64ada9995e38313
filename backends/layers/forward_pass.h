// One Forward call's rows, laid out for the shared blocks.
//
// The rows of every run of a batch are stacked into one residual stream x
// [rows][n_embd], so that each weight matrix is read once per call however
// many sequences it serves. ForwardPass owns that stream and what the blocks
// need to know about its rows: the run and memory each belongs to, its
// position (and M-RoPE position), its K/V row in its memory, which rows'
// logits are wanted, and the state taps of checkpoints inside runs. An
// architecture's wiring (backends/layers/arch_model.h) drives it: embed,
// then per layer norms, blocks and residual adds, then the output head.
//
// A family may split long runs into segments (micro-batches): a pass then
// covers some segments, in order, and the next pass continues from the state
// the previous one left. Everything here works per segment.
//
// Not thread-safe: one pass at a time per backend (the backend serializes
// Forward); the steps themselves spread their rows over the pool.
#ifndef CAIRN_BACKENDS_LAYERS_FORWARD_PASS_H_
#define CAIRN_BACKENDS_LAYERS_FORWARD_PASS_H_

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/rope.h"
#include "backends/kernels/thread_pool.h"
#include "backends/layers/recurrent_run.h"
#include "backends/layers/work_buffers.h"
#include "backends/memory/layer_memory.h"
#include "backends/model/gguf.h"

namespace cairn {

// Rotary position encoding of an architecture's attention layers. Layers
// refer to it by pointer: the pass computes each encoding's cos/sin table
// once per call (per row), however many layers share it.
struct PositionEncoding {
  RopeParams params;
  // Interleaved M-RoPE (qwen35): rows rotate by their (t, y, x, e) position
  // over these sections; otherwise by the text position alone.
  bool imrope = false;
  int32_t sections[4] = {0, 0, 0, 0};
};

// The final norm and projection to the vocabulary, and what the
// architecture does to logits afterwards.
struct OutputHead {
  std::vector<float> norm;  // RMSNorm weight [n_embd]
  float eps = 1e-5f;
  WeightMatrix output;       // n_embd -> n_vocab (the token embedding when tied)
  float logit_scale = 0.0f;  // > 0: logits divided by it (granite)
  float softcap = 0.0f;      // > 0: softcap * tanh(logit / softcap) (gemma)
};

class ForwardPass {
 public:
  // Rows [begin, begin + n) of batch[run].
  struct Segment {
    size_t run = 0;
    int64_t begin = 0;
    int64_t n = 0;
  };

  // `memories[r]` is batch[r].memory, reserved for its run; `results[r]`
  // has room for batch[r]'s logits and holds its in-run snapshots, whose
  // recurrent states start at snapshot_states[r][k]. All must outlive the
  // pass. `precision`: what the blocks' weight products use (the backend's
  // BackendOptions::exact_activations).
  ForwardPass(std::span<const SequenceRun> batch, std::span<const Segment> segments,
              std::span<LayerMemory* const> memories, std::span<RunLogits> results,
              std::span<const std::vector<uint8_t*>> snapshot_states, int64_t n_embd, ThreadPool& pool,
              MatMulPrecision precision, WorkBuffers& buffers);

  // --- Layout.
  // Rows the stream holds: every row of the pass, or only the wanted rows
  // after KeepWantedRows.
  int64_t n_rows() const { return n_rows_; }
  int64_t n_all_rows() const { return static_cast<int64_t>(row_segment_.size()); }
  int64_t width() const { return n_embd_; }
  float* x() { return x_.data(); }
  ThreadPool& pool() { return pool_; }
  // The precision of every weight product of the pass (MoE routers excepted:
  // they are always exact).
  MatMulPrecision precision() const { return precision_; }
  WorkBuffers& buffers() { return buffers_; }

  size_t n_segments() const { return segments_.size(); }
  // Stream rows [first_row(s), first_row(s) + segment_rows(s)) are segment s's.
  int64_t first_row(size_t s) const { return segment_info_[s].first_row; }
  int64_t segment_rows(size_t s) const { return segments_[s].n; }
  LayerMemory& memory(size_t s) { return *memories_[segments_[s].run]; }
  // The position of the segment's first row (a chunk's rows all share it).
  Pos start_pos(size_t s) const { return segment_info_[s].start_pos; }
  // Per row of the pass: its position, and its row in its memory's
  // attention storage (LayerMemory::stored_rows() counts them).
  std::span<const int32_t> positions() const { return pos_; }
  std::span<const int64_t> kv_rows() const { return kv_row_; }
  // The rows whose logits are wanted (pass rows, ascending), and segment
  // s's share of them: wanted_rows()[wanted_begin(s) .. wanted_begin(s + 1)).
  std::span<const int64_t> wanted_rows() const { return wanted_; }
  int64_t wanted_begin(size_t s) const { return segment_info_[s].wanted_begin; }

  // --- Steps.
  // x = the token embedding rows (dequantized) or the chunks' embedding
  // rows, times `scale` when it is not 1.
  void Embed(const TensorInfo& token_embd, float scale = 1.0f);
  // RMSNorm (with `weight`) of each stream row into `out` (may be x()).
  void Norm(const std::vector<float>& weight, float eps, float* out);
  // Norm into the kNormed buffer: a block's input.
  float* Normed(const std::vector<float>& weight, float eps);
  // The kBlockOut buffer, room for a block's output of every row.
  float* BlockOut() { return buffers_.Get(WorkBuffers::kBlockOut, x_.size()); }
  // RMSNorm of each of the stream's rows of `y`, in place (sandwich norms).
  void NormInPlace(float* y, const std::vector<float>& weight, float eps);
  // x += y, or x += scale * y when scale is not 1 (granite's residual scale).
  void AddResidual(const float* y, float scale = 1.0f);
  // Keeps only the wanted rows in the stream, in order: after the last
  // layer's attention, the rest of the last layer and the output head work
  // on them alone (their K/V rows were stored for all).
  void KeepWantedRows();
  // The logits of the wanted rows, into the results.
  void Logits(const OutputHead& head);

  // --- For blocks.
  // cos/sin per row (n_dims floats each) of `rope`, computed on first use.
  const float* RopeTable(const PositionEncoding& rope);
  // Every segment's run of recurrent slot `slot`: its rows, its state, and
  // the taps of its snapshots, pointing into the results' snapshots.
  std::span<const RecurrentRun> RecurrentRuns(int32_t slot);

 private:
  struct SegmentInfo {
    int64_t first_row = 0;
    Pos start_pos = 0;
    int64_t wanted_begin = 0;
    int64_t logit_index = 0;     // index among the run's logit rows of its first wanted row
    std::vector<StateTap> taps;  // rows relative to the segment
    std::vector<uint8_t*> tap_states;
  };

  std::span<const SequenceRun> batch_;
  std::vector<Segment> segments_;
  std::span<LayerMemory* const> memories_;
  std::span<RunLogits> results_;
  int64_t n_embd_;
  ThreadPool& pool_;
  MatMulPrecision precision_;
  WorkBuffers& buffers_;

  std::vector<SegmentInfo> segment_info_;  // one per segment, plus an end marker
  std::vector<int32_t> row_segment_, pos_;
  std::vector<int64_t> kv_row_;
  std::vector<std::array<float, 4>> rope_pos_;  // (t, y, x, e)
  std::vector<int64_t> wanted_;
  std::vector<float> x_;
  int64_t n_rows_ = 0;
  bool compacted_ = false;
  std::vector<std::pair<const PositionEncoding*, std::vector<float>>> rope_tables_;
  std::vector<RecurrentRun> recurrent_runs_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_FORWARD_PASS_H_
