#include "checkpoint/disk_tier.h"

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"

namespace cairn::checkpoint {
namespace {

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'C', 'K', '1'};
constexpr uint32_t kVersion = 1;

// Fixed-size little-endian header (the build targets little-endian hosts).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t scope;
  int32_t pos;
  uint32_t reserved;
  uint64_t layout;
  uint64_t id;
  uint64_t data_len;
  uint64_t logits_count;
  uint64_t tag_len;
  double cost;
  uint64_t header_hash;  // of every field above
};
static_assert(sizeof(FileHeader) == 80);

uint64_t HeaderHash(const FileHeader& h) { return HashBytes(&h, offsetof(FileHeader, header_hash), 1); }

size_t PayloadBytes(const FileHeader& h) { return h.data_len + h.logits_count * sizeof(float) + h.tag_len; }

SnapshotScope ScopeOf(const FileHeader& h) { return h.scope == 1 ? SnapshotScope::kFull : SnapshotScope::kCheckpoint; }

// Reads and verifies the header of an open file (size included).
absl::StatusOr<FileHeader> ReadHeader(RandomAccessFile& file, const std::string& path) {
  const uint64_t size = file.info().size;
  if (size < sizeof(FileHeader) + 8) return absl::DataLossError(absl::StrCat(path, " is truncated"));
  FileHeader h;
  if (auto s = file.Read(0, MutableBytesOf(&h, 1)); !s.ok()) return s;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kVersion || HeaderHash(h) != h.header_hash) {
    return absl::DataLossError(absl::StrCat(path, ": header is corrupt"));
  }
  // Lengths are covered by the header hash, but guard the arithmetic anyway.
  if (h.data_len > (uint64_t{1} << 48) || h.logits_count > (uint64_t{1} << 40) || h.tag_len > (uint64_t{1} << 32) ||
      size != sizeof(FileHeader) + PayloadBytes(h) + 8) {
    return absl::DataLossError(absl::StrCat(path, ": size does not match its header"));
  }
  return h;
}

// The trailer: a hash over the header and every part of the payload.
uint64_t PayloadHash(const FileHeader& h, const Checkpoint& cp) {
  Hash64 sum(2);
  sum.Update(&h, sizeof(h));
  sum.Update(cp.snapshot.data.data(), cp.snapshot.data.size());
  sum.Update(cp.logits.data(), cp.logits.size() * sizeof(float));
  sum.Update(cp.tag.data(), cp.tag.size());
  return sum.Finish();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Create(Env* env, std::string dir, Warn warn) {
  if (auto s = env->CreateDir(dir); !s.ok()) return s;
  return std::unique_ptr<DiskTier>(new DiskTier(env, std::move(dir), std::move(warn)));
}

DiskTier::DiskTier(Env* env, std::string dir, Warn warn) : env_(env), dir_(std::move(dir)), warn_(std::move(warn)) {}

void DiskTier::Report(const std::string& message) const {
  if (warn_) warn_(message);
}

std::string DiskTier::Path(CheckpointId id) const { return absl::StrCat(dir_, "/ckpt-", id, ".bin"); }

void DiskTier::Delete(CheckpointId id) const { env_->DeleteFile(Path(id)).IgnoreError(); }

absl::StatusOr<DiskTier::ScanResult> DiskTier::Scan() const {
  absl::StatusOr<std::vector<std::string>> names = env_->ListDir(dir_);
  if (!names.ok()) return names.status();
  ScanResult result;
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, "ckpt-")) continue;  // not ours: leave it alone
    const std::string path = dir_ + "/" + name;
    if (absl::EndsWith(name, ".tmp")) {
      env_->DeleteFile(path).IgnoreError();
      Report(absl::StrCat("checkpoint file ", path, " deleted: a write that never completed"));
      continue;
    }
    if (!absl::EndsWith(name, ".bin")) continue;
    uint64_t id = 0;
    if (!absl::SimpleAtoi(name.substr(5, name.size() - 9), &id) || id == 0) continue;
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = env_->OpenForRead(path);
    if (!file.ok()) {
      Report(absl::StrCat("checkpoint file ", path, " ignored (left in place): ", file.status().message()));
      continue;
    }
    absl::StatusOr<FileHeader> h = ReadHeader(**file, path);
    std::string tag;
    if (h.ok() && h->id == id) {
      tag.resize(h->tag_len);
      const uint64_t off = sizeof(FileHeader) + h->data_len + h->logits_count * sizeof(float);
      if (absl::Status s = (*file)->Read(off, MutableBytesOf(tag.data(), tag.size())); !s.ok()) h = s;
    } else if (h.ok()) {
      h = absl::DataLossError("its name does not match its id");
    }
    file->reset();
    if (!h.ok()) {
      env_->DeleteFile(path).IgnoreError();
      ++result.corrupt;
      Report(absl::StrCat("checkpoint file ", path, " deleted at start-up: ", h.status().message()));
      continue;
    }
    const size_t bytes = PayloadBytes(*h) + kCheckpointOverheadBytes;
    result.found.push_back(Found{id, h->pos, ScopeOf(*h), h->layout, bytes, h->cost, std::move(tag)});
  }
  return result;
}

absl::Status DiskTier::Write(CheckpointId id, const Checkpoint& cp, double cost) const {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.scope = cp.snapshot.scope == SnapshotScope::kFull ? 1 : 0;
  h.pos = cp.snapshot.pos;
  h.layout = cp.snapshot.layout;
  h.id = id;
  h.data_len = cp.snapshot.data.size();
  h.logits_count = cp.logits.size();
  h.tag_len = cp.tag.size();
  h.cost = cost;
  h.header_hash = HeaderHash(h);
  const uint64_t trailer = PayloadHash(h, cp);

  const std::string final_path = Path(id);
  const std::string tmp_path = final_path.substr(0, final_path.size() - 4) + ".tmp";
  const std::span<const std::byte> parts[] = {BytesOf(&h, 1), BytesOf(cp.snapshot.data.data(), cp.snapshot.data.size()),
                                              BytesOf(cp.logits.data(), cp.logits.size()),
                                              BytesOf(cp.tag.data(), cp.tag.size()), BytesOf(&trailer, 1)};
  return env_->WriteFileAtomically(final_path, tmp_path, parts).status();
}

absl::StatusOr<std::shared_ptr<Checkpoint>> DiskTier::Read(CheckpointId id, Pos pos, uint64_t layout) const {
  const std::string path = Path(id);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = env_->OpenForRead(path);
  if (!file.ok()) {
    return absl::IsNotFound(file.status()) ? absl::DataLossError("checkpoint file vanished: " + path) : file.status();
  }
  absl::StatusOr<FileHeader> h = ReadHeader(**file, path);
  if (!h.ok()) return h.status();
  if (h->id != id || h->pos != pos || h->layout != layout) {
    return absl::DataLossError("checkpoint file does not match its entry: " + path);
  }
  auto cp = std::make_shared<Checkpoint>();
  cp->snapshot.pos = h->pos;
  cp->snapshot.scope = ScopeOf(*h);
  cp->snapshot.layout = h->layout;
  cp->snapshot.data.resize(h->data_len);
  cp->logits.resize(h->logits_count);
  cp->tag.resize(h->tag_len);
  uint64_t trailer = 0;
  uint64_t off = sizeof(FileHeader);
  absl::Status s;
  for (std::span<std::byte> part : {MutableBytesOf(cp->snapshot.data.data(), cp->snapshot.data.size()),
                                    MutableBytesOf(cp->logits.data(), cp->logits.size()),
                                    MutableBytesOf(cp->tag.data(), cp->tag.size()), MutableBytesOf(&trailer, 1)}) {
    if (s.ok()) s = (*file)->Read(off, part);
    off += part.size();
  }
  if (!s.ok()) return s;
  if (PayloadHash(*h, *cp) != trailer) return absl::DataLossError("checkpoint file checksum mismatch: " + path);
  return cp;
}

}  // namespace cairn::checkpoint
