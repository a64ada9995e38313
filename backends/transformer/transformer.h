// The transformer family: decoder-only models whose whole memory is a full
// F32 key/value cache (KvMemory), so any position can be cut back without a
// checkpoint. Architectures (one wiring file each): llama, qwen2, qwen3,
// qwen3moe, deci (whose layers declare their own head counts).
#ifndef CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_
#define CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_

#include "backends/backend.h"

namespace cairn {

// Name "transformer". Its factory's errors: INVALID_ARGUMENT for a file of
// another architecture or with missing/inconsistent tensors or metadata (the
// message names them), UNIMPLEMENTED for RoPE scaling kinds not supported
// (longrope).
BackendFamily TransformerFamily();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_TRANSFORMER_TRANSFORMER_H_
