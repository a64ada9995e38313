// Parsing of one GGUF file (versions 2 and 3) and the model view over one or
// several split files.
#ifndef CAIRN_BACKENDS_MODEL_GGUF_H_
#define CAIRN_BACKENDS_MODEL_GGUF_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/ggml_type.h"
#include "backends/model/metadata.h"

namespace cairn {

inline constexpr int kMaxTensorDims = 4;

// Where a tensor lives and what it holds. `data` points into read-only mapped
// (or owned) memory that lives as long as the GgufFile/ModelFile it came from.
struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // ne[0] is the innermost (contiguous) dimension, as in GGUF; unused dims are 1.
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // relative to the file's data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;
  int file_index = 0;  // which split file holds the data

  int64_t n_elements() const;
  int64_t row_size() const { return shape.empty() ? 1 : shape[0]; }
  int64_t n_rows() const { return row_size() == 0 ? 0 : n_elements() / row_size(); }
  const uint8_t* row(int64_t r) const { return data + r * RowBytes(type, row_size()); }
};

// Immutable, read-only view of one parsed GGUF file. Thread-safe after creation.
class GgufFile final {
 public:
  // Opens and mmaps `path` read-only, then parses it. Errors:
  // NOT_FOUND / PERMISSION_DENIED when the file cannot be opened, and
  // INVALID_ARGUMENT (bad magic, version, truncated or inconsistent content,
  // unknown tensor type ...) naming the byte offset and what was expected.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image; the bytes are copied into the object.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::span<const uint8_t> bytes,
                                                              std::string name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  friend class ModelFile;  // records which split each tensor came from; releases pages
  GgufFile() = default;
  absl::Status Parse();
  absl::Status PlaceTensorData();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;     // mmap'd region, or null
  std::vector<uint8_t> owned_;  // for FromBuffer
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
};

// A model: one GGUF file or a set of split files (`name-00001-of-0000N.gguf`)
// opened as one. Metadata comes from the first split; tensors from all.
// Immutable and thread-safe after creation.
class ModelFile final {
 public:
  // Opens `path`; when its name matches the split pattern (or it declares
  // `split.count` > 1) every split is opened. Errors: as GgufFile::Open, plus
  // NOT_FOUND for a missing split and INVALID_ARGUMENT for inconsistent
  // splits or a tensor name that occurs twice.
  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path);
  // A model held in memory (synthetic models, tests).
  static absl::StatusOr<std::unique_ptr<ModelFile>> FromBuffer(std::span<const uint8_t> bytes,
                                                               std::string name = "<memory>");

  const std::string& path() const { return path_; }
  const Metadata& metadata() const { return files_.front()->metadata(); }
  const std::vector<std::unique_ptr<GgufFile>>& files() const { return files_; }
  // All tensors of all splits in file order.
  const std::vector<const TensorInfo*>& tensors() const { return ordered_; }
  // Null when absent.
  const TensorInfo* FindTensor(std::string_view name) const;
  // NOT_FOUND naming the tensor when absent.
  absl::StatusOr<const TensorInfo*> GetTensor(std::string_view name) const;
  // general.architecture (INVALID_ARGUMENT/NOT_FOUND when missing or not a string).
  absl::StatusOr<std::string> Architecture() const;

  // Tells the OS that the whole pages of [data, data + bytes) will not be
  // read for now (a copy of them serves instead, e.g. packed weights): where
  // they lie in a split's read-only file mapping, they leave this process's
  // resident memory and are read back from the file if touched again, so
  // the contents never change. Anything else (a model held in memory) is
  // left alone. Thread-safe.
  void ReleasePages(const uint8_t* data, size_t bytes) const;

 private:
  ModelFile() = default;
  absl::Status Index();

  std::string path_;
  std::vector<std::unique_ptr<GgufFile>> files_;
  std::vector<const TensorInfo*> ordered_;
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_GGUF_H_
