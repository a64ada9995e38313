// The entry point of libcairn_recurrent_plugin.so (backends/plugin.h).
#include "backends/plugin.h"
#include "backends/recurrent/recurrent_backend.h"

CAIRN_BACKEND_PLUGIN(cairn::RecurrentFamily())
