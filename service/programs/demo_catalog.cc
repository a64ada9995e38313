#include "service/programs/demo_catalog.h"

#include "service/programs/demo_models.h"

namespace cairn::service {

BuiltinModels DemoModelCatalog() {
  BuiltinModels catalog;
  catalog.served_by_default = DemoModelNames();
  catalog.contains = IsDemoModel;
  catalog.build = [](const std::string& name) -> absl::StatusOr<std::shared_ptr<const ModelFile>> {
    absl::StatusOr<DemoModel> demo = BuildDemoModel(name);
    if (!demo.ok()) return demo.status();
    return demo->file;
  };
  return catalog;
}

}  // namespace cairn::service
