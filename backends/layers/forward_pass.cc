#include "backends/layers/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/kernels/norm.h"
#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"

namespace cairn {

ForwardPass::ForwardPass(std::span<const SequenceRun> batch, std::span<const Segment> segments,
                         std::span<LayerMemory* const> memories, std::span<RunLogits> results,
                         std::span<const std::vector<uint8_t*>> snapshot_states, int64_t n_embd, ThreadPool& pool,
                         MatMulPrecision precision, WorkBuffers& buffers)
    : batch_(batch),
      segments_(segments.begin(), segments.end()),
      memories_(memories),
      results_(results),
      n_embd_(n_embd),
      pool_(pool),
      precision_(precision),
      buffers_(buffers),
      segment_info_(segments.size() + 1) {
  int64_t n_rows = 0;
  for (const Segment& seg : segments_) n_rows += seg.n;
  row_segment_.resize(n_rows);
  pos_.resize(n_rows);
  kv_row_.resize(n_rows);
  rope_pos_.resize(n_rows);

  int64_t row = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    const SequenceRun& run = batch_[seg.run];
    SegmentInfo& info = segment_info_[s];
    const EmbeddingChunk* chunk = run.chunk;
    info.first_row = row;
    info.start_pos = chunk != nullptr ? run.start_pos : run.start_pos + static_cast<Pos>(seg.begin);
    const int64_t stored = memories_[seg.run]->stored_rows() + seg.begin;
    for (int64_t i = 0; i < seg.n; ++i) {
      row_segment_[row + i] = static_cast<int32_t>(s);
      kv_row_[row + i] = stored + i;
      if (chunk != nullptr) {
        // Row j of a chunk at p0: (p0, p0 + j / nx, p0 + j % nx, 0).
        const int64_t j = seg.begin + i;
        const Pos p0 = run.start_pos;
        pos_[row + i] = p0;
        rope_pos_[row + i] = {static_cast<float>(p0), static_cast<float>(p0 + j / chunk->nx),
                              static_cast<float>(p0 + j % chunk->nx), 0.0f};
      } else {
        const Pos p = info.start_pos + static_cast<Pos>(i);
        pos_[row + i] = p;
        rope_pos_[row + i] = {static_cast<float>(p), static_cast<float>(p), static_cast<float>(p), 0.0f};
      }
    }
    // The run's logit and snapshot rows that fall in this segment.
    const std::span<const int32_t> logit_rows = run.logit_rows;
    const auto first = std::lower_bound(logit_rows.begin(), logit_rows.end(), seg.begin);
    info.logit_index = first - logit_rows.begin();
    info.wanted_begin = static_cast<int64_t>(wanted_.size());
    for (auto it = first; it != logit_rows.end() && *it < seg.begin + seg.n; ++it) {
      wanted_.push_back(row + *it - seg.begin);
    }
    for (size_t k = 0; k < run.snapshot_rows.size(); ++k) {
      const int32_t snap = run.snapshot_rows[k];
      if (snap < seg.begin || snap >= seg.begin + seg.n) continue;
      info.taps.push_back(StateTap{snap + 1 - seg.begin, nullptr, nullptr});
      info.tap_states.push_back(snapshot_states[seg.run][k]);
    }
    row += seg.n;
  }
  segment_info_.back().first_row = row;
  segment_info_.back().wanted_begin = static_cast<int64_t>(wanted_.size());
  x_.resize(static_cast<size_t>(n_rows * n_embd_));
  n_rows_ = n_rows;
}

void ForwardPass::Embed(const TensorInfo& token_embd, float scale) {
  const int64_t E = n_embd_;
  const size_t row_bytes = RowBytes(token_embd.type, E);
  pool_.ForEach(n_rows_, [&](int64_t i) {
    const Segment& seg = segments_[row_segment_[i]];
    const SequenceRun& run = batch_[seg.run];
    const int64_t j = seg.begin + i - segment_info_[row_segment_[i]].first_row;
    float* xi = &x_[i * E];
    if (run.chunk != nullptr) {
      std::copy_n(run.chunk->rows + j * E, E, xi);
    } else {
      DequantizeRow(token_embd.type, token_embd.data + static_cast<size_t>(run.tokens[j]) * row_bytes, xi, E);
    }
    if (scale != 1.0f) {
      for (int64_t e = 0; e < E; ++e) xi[e] *= scale;
    }
  });
}

void ForwardPass::Norm(const std::vector<float>& weight, float eps, float* out) {
  const int64_t E = n_embd_;
  pool_.ForEach(n_rows_, [&](int64_t i) { RmsNorm(&x_[i * E], weight.data(), E, eps, &out[i * E]); });
}

float* ForwardPass::Normed(const std::vector<float>& weight, float eps) {
  float* out = buffers_.Get(WorkBuffers::kNormed, x_.size());
  Norm(weight, eps, out);
  return out;
}

void ForwardPass::NormInPlace(float* y, const std::vector<float>& weight, float eps) {
  const int64_t E = n_embd_;
  pool_.ForEach(n_rows_, [&](int64_t i) { RmsNorm(&y[i * E], weight.data(), E, eps, &y[i * E]); });
}

void ForwardPass::AddResidual(const float* y, float scale) {
  const int64_t E = n_embd_;
  pool_.ForEach(n_rows_, [&](int64_t i) {
    if (scale != 1.0f) {
      for (int64_t e = 0; e < E; ++e) x_[i * E + e] += scale * y[i * E + e];
    } else {
      AddF32(&x_[i * E], &y[i * E], &x_[i * E], E);
    }
  });
}

void ForwardPass::KeepWantedRows() {
  const int64_t E = n_embd_;
  const int64_t W = static_cast<int64_t>(wanted_.size());
  for (int64_t j = 0; j < W; ++j) {
    if (wanted_[j] != j) std::copy_n(&x_[wanted_[j] * E], E, &x_[j * E]);
  }
  n_rows_ = W;
  compacted_ = true;
}

void ForwardPass::Logits(const OutputHead& head) {
  const int64_t E = n_embd_;
  const int64_t W = static_cast<int64_t>(wanted_.size());
  const int64_t V = head.output.n_out;
  // Work buffers: a decode step of 8 sequences over a 150k vocabulary would
  // otherwise fault in and zero-fill 5 MB per call.
  float* const hn = buffers_.Get(WorkBuffers::kNormed, static_cast<size_t>(W * E));
  float* const logits = buffers_.Get(WorkBuffers::kLogits, static_cast<size_t>(W * V));
  pool_.ForEach(W, [&](int64_t j) {
    const int64_t src = compacted_ ? j : wanted_[j];
    RmsNorm(&x_[src * E], head.norm.data(), E, head.eps, &hn[j * E]);
  });
  MatMul(head.output, hn, W, logits, pool_, precision_);
  if (head.logit_scale > 0.0f) {
    const float inv = 1.0f / head.logit_scale;
    for (int64_t i = 0; i < W * V; ++i) logits[i] *= inv;
  }
  if (head.softcap > 0.0f) {
    const float cap = head.softcap;
    pool_.ForEach(W, [&](int64_t j) {
      float* l = &logits[j * V];
      for (int64_t t = 0; t < V; ++t) l[t] = cap * std::tanh(l[t] / cap);
    });
  }
  for (size_t s = 0; s < segments_.size(); ++s) {
    const SegmentInfo& info = segment_info_[s];
    const int64_t begin = info.wanted_begin, end = segment_info_[s + 1].wanted_begin;
    if (begin == end) continue;
    float* dst = results_[segments_[s].run].values.data() + info.logit_index * V;
    std::memcpy(dst, &logits[begin * V], static_cast<size_t>((end - begin) * V) * sizeof(float));
  }
}

const float* ForwardPass::RopeTable(const PositionEncoding& rope) {
  for (const auto& [encoding, table] : rope_tables_) {
    if (encoding == &rope) return table.data();
  }
  const int32_t n_dims = rope.params.n_dims;
  std::vector<float> table(static_cast<size_t>(n_all_rows() * n_dims));
  pool_.ForEach(n_all_rows(), [&](int64_t i) {
    if (rope.imrope) {
      RopeCacheImrope(rope.params, rope.sections, rope_pos_[i].data(), &table[i * n_dims]);
    } else {
      RopeCache(rope.params, rope_pos_[i][0], &table[i * n_dims]);
    }
  });
  rope_tables_.emplace_back(&rope, std::move(table));
  return rope_tables_.back().second.data();
}

std::span<const RecurrentRun> ForwardPass::RecurrentRuns(int32_t slot) {
  recurrent_runs_.resize(segments_.size());
  for (size_t s = 0; s < segments_.size(); ++s) {
    SegmentInfo& info = segment_info_[s];
    LayerMemory& mem = memory(s);
    for (size_t k = 0; k < info.taps.size(); ++k) {
      const RecurrentState tap = mem.recurrent_in(info.tap_states[k], slot);
      info.taps[k].conv_state = tap.conv;
      info.taps[k].state = tap.state;
    }
    const RecurrentState state = mem.recurrent(slot);
    recurrent_runs_[s] = RecurrentRun{info.first_row, segments_[s].n, state.conv, state.state, info.taps};
  }
  return recurrent_runs_;
}

}  // namespace cairn
