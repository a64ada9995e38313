// Fuzzes the GGUF reader: any input must either parse or return a Status,
// and everything a parsed file exposes must be safe to read.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/model/dequant.h"
#include "backends/model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<cairn::GgufFile>> file =
      cairn::GgufFile::FromBuffer(std::span<const uint8_t>(data, size));
  if (!file.ok()) return 0;
  size_t sink = 0;
  for (const auto& [key, value] : (*file)->metadata().entries()) {
    sink += value.ToString().size() + value.TypeDescription().size();
  }
  // Touch every tensor's first and last row through the dequantizer.
  std::vector<float> row;
  for (const cairn::TensorInfo& t : (*file)->tensors()) {
    if (t.row_size() > (1 << 16)) continue;
    row.resize(static_cast<size_t>(t.row_size()));
    cairn::DequantizeRow(t.type, t.row(0), row.data(), t.row_size());
    cairn::DequantizeRow(t.type, t.row(t.n_rows() - 1), row.data(), t.row_size());
    sink += static_cast<size_t>(row[0] == 0.0f);
  }
  return sink == 0xdeadbeef ? 1 : 0;
}
