#include "service/sessions/history_proto.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::service {

absl::Status CheckToken(const ServedModel& model, int32_t id) {
  if (id < 0 || id >= model.info().n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " out of range [0, ", model.info().n_vocab, ") for model '", model.name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ChunkData>> ToChunk(const ServedModel& model, const v1::EmbeddingChunk& c) {
  if (!model.info().accepts_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.name, "' does not accept embedding chunks"));
  }
  if (c.width() != model.info().n_embd) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding width ", c.width(), " != the model's n_embd ", model.info().n_embd));
  }
  if (c.nx() <= 0 || c.ny() <= 0 || c.nx() > (1 << 16) || c.ny() > (1 << 16)) {
    return absl::InvalidArgumentError(absl::StrCat("bad embedding grid ", c.nx(), "x", c.ny()));
  }
  const int64_t want = int64_t{c.nx()} * c.ny() * c.width();
  if (want != c.values_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding chunk has ", c.values_size(), " values, grid and width need ", want));
  }
  // A NaN or infinity would flow through every layer into the sequence's
  // memory and make every later logit NaN: refuse it before it gets there.
  for (int i = 0; i < c.values_size(); ++i) {
    if (!std::isfinite(c.values(i))) {
      return absl::InvalidArgumentError(absl::StrCat("embedding value ", c.values(i), " at row ", i / c.width(),
                                                     ", column ", i % c.width(), " is not finite"));
    }
  }
  auto d = std::make_shared<ChunkData>();
  d->rows.assign(c.values().begin(), c.values().end());
  d->width = c.width();
  d->nx = c.nx();
  d->ny = c.ny();
  return std::shared_ptr<const ChunkData>(std::move(d));
}

void HistoryToProto(const History& history, v1::SessionSnapshot* snap) {
  for (const HistoryItem& it : history.items) {
    v1::HistoryItem* h = snap->add_history();
    if (it.is_chunk()) {
      v1::EmbeddingChunk* c = h->mutable_chunk();
      c->mutable_values()->Assign(it.chunk->rows.begin(), it.chunk->rows.end());
      c->set_width(it.chunk->width);
      c->set_nx(it.chunk->nx);
      c->set_ny(it.chunk->ny);
    } else {
      h->set_token(it.token);
    }
  }
  for (size_t e : history.message_ends) snap->add_message_ends(static_cast<int32_t>(e));
}

absl::StatusOr<History> HistoryFromProto(const ServedModel& model, const v1::SessionSnapshot& snap) {
  History h;
  for (const v1::HistoryItem& it : snap.history()) {
    if (it.has_chunk()) {
      auto c = ToChunk(model, it.chunk());
      if (!c.ok()) return c.status();
      h.AddChunk(std::move(*c));
    } else {
      if (absl::Status st = CheckToken(model, it.token()); !st.ok()) return st;
      h.AddToken(it.token());
    }
  }
  for (int32_t e : snap.message_ends()) {
    if (e <= 0 || static_cast<size_t>(e) > h.size() ||
        (!h.message_ends.empty() && h.message_ends.back() >= static_cast<size_t>(e))) {
      return absl::InvalidArgumentError("snapshot message boundaries are malformed");
    }
    h.message_ends.push_back(static_cast<size_t>(e));
  }
  return h;
}

}  // namespace cairn::service
