// Writes GGUF images: the synthetic models (synthetic/: the server's demo
// models, benchmarks, tests) and malformed files in tests.
#ifndef CAIRN_BACKENDS_MODEL_GGUF_WRITER_H_
#define CAIRN_BACKENDS_MODEL_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/ggml_type.h"
#include "backends/model/metadata.h"

namespace cairn {

// Not thread-safe. Tensors are laid out in insertion order, each aligned.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, uint64_t alignment = 32) : version_(version), alignment_(alignment) {}

  void Set(std::string key, MetadataValue value);
  void SetUint32(std::string key, uint32_t v);
  void SetInt32(std::string key, int32_t v);
  void SetUint64(std::string key, uint64_t v);
  void SetFloat32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string v);
  void SetStringArray(std::string key, std::vector<std::string> v);
  void SetInt32Array(std::string key, const std::vector<int32_t>& v);
  void SetFloat32Array(std::string key, const std::vector<float>& v);
  // Removes `key`; false when it is not set.
  bool Erase(const std::string& key);

  // `data` must hold exactly RowBytes(type, shape[0]) * rows bytes.
  void AddTensor(std::string name, GgmlType type, std::vector<int64_t> shape, std::vector<uint8_t> data);
  void AddF32Tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& values);

  std::vector<uint8_t> Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  uint32_t version_;
  uint64_t alignment_;
  std::vector<std::pair<std::string, MetadataValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_GGUF_WRITER_H_
