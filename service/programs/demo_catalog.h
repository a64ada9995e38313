// The built-in synthetic models (demo_models.h) as the model loader takes
// them (service/host/models.h, BuiltinModels): what cairn-server and
// cairn-load serve without a model file, and what tests and benchmarks
// serve by name.
#ifndef CAIRN_SERVICE_PROGRAMS_DEMO_CATALOG_H_
#define CAIRN_SERVICE_PROGRAMS_DEMO_CATALOG_H_

#include "service/host/models.h"

namespace cairn::service {

// served_by_default: DemoModelNames(); contains: IsDemoModel; build:
// BuildDemoModel's file.
BuiltinModels DemoModelCatalog();

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_PROGRAMS_DEMO_CATALOG_H_
