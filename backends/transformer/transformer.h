// The transformer family: decoder-only models whose whole memory is a full
// F32 key/value cache (KvMemory), so any position can be cut back without a
// checkpoint. Architectures (one wiring file each): llama, qwen2, qwen3,
// qwen3moe.
#ifndef CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_
#define CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace cairn {

inline constexpr char kTransformerFamily[] = "transformer";

// The architectures this family serves.
std::vector<std::string> TransformerArchs();

// Loads the model's hyperparameters and weights. Errors: INVALID_ARGUMENT for
// a file of another architecture or with missing/inconsistent tensors or
// metadata (the message names them), UNIMPLEMENTED for RoPE scaling kinds not
// supported (yarn, longrope).
absl::StatusOr<std::unique_ptr<Backend>> CreateTransformerBackend(std::shared_ptr<const ModelFile> model,
                                                                  const BackendOptions& options);

// Registers the family under kTransformerFamily for TransformerArchs().
absl::Status RegisterTransformerFamily(BackendRegistry& registry);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_
