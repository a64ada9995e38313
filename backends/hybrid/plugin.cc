// The entry point of libcairn_hybrid_plugin.so (backends/plugin.h).
#include "backends/plugin.h"
#include "backends/hybrid/hybrid_backend.h"

CAIRN_BACKEND_PLUGIN(cairn::HybridFamily())
