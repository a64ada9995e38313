// The entry point of libcairn_transformer_plugin.so (backends/plugin.h).
#include "backends/plugin.h"
#include "backends/transformer/transformer.h"

CAIRN_BACKEND_PLUGIN(cairn::TransformerFamily())
