// Fingerprints that tell snapshots of one model and memory geometry from
// snapshots of any other (Snapshot::layout).
//
// FNV-1a over 64 bits: stable across processes, builds and machines (unlike
// absl::Hash), because snapshots are written to disk and read by another
// process or replica. Thread-safe (pure functions).
#ifndef CAIRN_BACKENDS_MEMORY_FINGERPRINT_H_
#define CAIRN_BACKENDS_MEMORY_FINGERPRINT_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "backends/model/gguf.h"

namespace cairn {

uint64_t FingerprintMix(uint64_t h, const void* data, size_t n);
inline uint64_t FingerprintMix(uint64_t h, int64_t v) { return FingerprintMix(h, &v, sizeof v); }
inline uint64_t FingerprintMix(uint64_t h, std::string_view s) { return FingerprintMix(h, s.data(), s.size()); }

// A model file: its metadata (but the tokenizer's), every tensor's name,
// type and shape, and up to 3 x 64 bytes of its data (start, middle, end).
// Hashing every weight would cost a pass over gigabytes at load; the
// samples tell apart two files of one shape.
uint64_t ModelFingerprint(const ModelFile& model);

// The layout of a family's snapshots: the model's fingerprint, a tag naming
// the memory encoding (bump it when the encoding changes) and the geometry
// values that size the memory.
uint64_t MemoryLayout(const ModelFile& model, std::string_view encoding, std::initializer_list<int64_t> geometry);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_FINGERPRINT_H_
