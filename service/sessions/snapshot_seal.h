// Integrity and provenance of session snapshots (exports and session
// directory files). A snapshot carries a checksum (SHA-256 over a canonical
// encoding of every field that decides what the session holds: version,
// model, arch, n_vocab, layout, pos, state, history, message ends; not the
// session id, which the importer decides) and, when the exporting server has
// a snapshot key (--snapshot-key) and trusts the state, a signature
// (HMAC-SHA256 of the checksum under that key).
//
// The checksum stops accidents (a damaged or edited file): anyone can
// recompute it. Only the signature tells a server that the state was
// computed by a server holding the same key, i.e. may serve other sequences
// through the shared prefix index. Thread-safe (no state).
#ifndef CAIRN_SERVICE_SESSIONS_SNAPSHOT_SEAL_H_
#define CAIRN_SERVICE_SESSIONS_SNAPSHOT_SEAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"

namespace cairn::service {

// The snapshot key of --snapshot-key=FILE: the file's bytes without a
// trailing newline. NOT_FOUND / PERMISSION_DENIED when it cannot be read,
// INVALID_ARGUMENT when shorter than 16 bytes (too weak a secret).
absl::StatusOr<std::string> ReadSnapshotKey(const std::string& path);

// Sets the checksum, and the signature when `key` is not empty (else
// clears it). `key` empty: the state is not vouched for.
void SealSnapshot(const std::string& key, v1::SessionSnapshot* snap);

enum class SnapshotProvenance {
  kUnauthenticated,  // checksum valid; no key here, or no / another signature
  kAuthenticated,    // signed with this server's key
};

// INVALID_ARGUMENT when the checksum is missing or does not match the
// content (tampered or damaged).
absl::StatusOr<SnapshotProvenance> VerifySnapshot(const std::string& key, const v1::SessionSnapshot& snap);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_SNAPSHOT_SEAL_H_
