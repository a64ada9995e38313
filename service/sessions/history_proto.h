// Conversions between the API's history items (token ids, embedding chunks)
// and the service's History, with the checks client input needs. Shared by
// prompt assembly and by session snapshots (export, import, the session
// directory).
#ifndef CAIRN_SERVICE_SESSIONS_HISTORY_PROTO_H_
#define CAIRN_SERVICE_SESSIONS_HISTORY_PROTO_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"
#include "service/host/models.h"
#include "service/scheduling/history.h"

namespace cairn::service {

// INVALID_ARGUMENT naming the model when `id` is not in [0, n_vocab).
absl::Status CheckToken(const ServedModel& model, int32_t id);

// A validated copy of an embedding chunk: INVALID_ARGUMENT when the model
// takes no embeddings, the width is not its n_embd, the grid is empty or
// larger than 65536 on a side, or the values do not fill the grid.
absl::StatusOr<std::shared_ptr<const ChunkData>> ToChunk(const ServedModel& model, const v1::EmbeddingChunk& chunk);

// The history's items and message boundaries into a snapshot (appended).
void HistoryToProto(const History& history, v1::SessionSnapshot* out);

// A snapshot's history, each item checked as above; INVALID_ARGUMENT also
// for message boundaries that are not ascending counts within the history.
absl::StatusOr<History> HistoryFromProto(const ServedModel& model, const v1::SessionSnapshot& snap);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_HISTORY_PROTO_H_
