// The entry point of libcairn_hybrid_plugin.so (backends/plugin.h).
#include "backends/hybrid/hybrid_backend.h"
#include "backends/plugin.h"

CAIRN_BACKEND_PLUGIN(cairn::HybridFamily())
