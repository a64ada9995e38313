// The built-in demo models loaded as a server loads them (ModelRegistry
// with every family linked in, one thread each, default checkpointing), for
// the unit tests of the rooms that take served models: real tokenizers,
// chat templates, backends, engines and schedulers.
#ifndef CAIRN_TESTS_SERVICE_TESTING_DEMO_REGISTRY_H_
#define CAIRN_TESTS_SERVICE_TESTING_DEMO_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/register_builtin.h"
#include "gtest/gtest.h"
#include "service/host/models.h"
#include "service/programs/demo_catalog.h"
#include "service/scheduling/scheduler.h"

namespace cairn::service::testing {

// `specs` as --model takes them ("tf=demo-transformer"), with the chat
// template files --chat-template gives (model name -> file); null (with a
// test failure) when they do not load.
inline std::unique_ptr<ModelRegistry> LoadDemoModels(const std::vector<std::string>& specs,
                                                     std::map<std::string, std::string> chat_template_files = {}) {
  BackendRegistry families;
  EXPECT_TRUE(RegisterBuiltinBackends(families).ok());
  ModelsOptions options;
  options.builtin = DemoModelCatalog();
  options.threads = 1;
  options.chat_template_files = std::move(chat_template_files);
  std::vector<ModelSpec> parsed;
  for (const std::string& s : specs) {
    auto spec = ParseModelSpec(s);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (spec.ok()) parsed.push_back(*spec);
  }
  auto registry = ModelRegistry::Load(parsed, options, SchedulerOptions(), families);
  EXPECT_TRUE(registry.ok()) << registry.status();
  return registry.ok() ? std::move(*registry) : nullptr;
}

}  // namespace cairn::service::testing

#endif  // CAIRN_TESTS_SERVICE_TESTING_DEMO_REGISTRY_H_
