// The entry point of libcairn_swa_plugin.so (backends/plugin.h).
#include "backends/plugin.h"
#include "backends/swa/swa_backend.h"

CAIRN_BACKEND_PLUGIN(cairn::SwaFamily())
