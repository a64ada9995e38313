// End-to-end tests (service_fixture.h): a real model from ../shared: stories260K's greedy
// continuation.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "service/host/models.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/shared_data.h"

namespace cairn::service::e2e {
namespace {

// The real TinyStories model through the whole service: greedy
// continuations equal llama.cpp's (ids and text).
TEST(ServiceRealModelTest, Stories260KGreedyMatchesLlamaCpp) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  std::ifstream in(testing::SharedPath("models/stories260K_greedy.json"));
  std::stringstream buf;
  buf << in.rdbuf();
  google::protobuf::ListValue cases;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(buf.str(), &cases).ok());
  ASSERT_GT(cases.values_size(), 0);
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("stories=" + testing::SharedPath("models/stories260K.gguf"))};
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok()) << server.status();
  Client c((*server)->port());
  for (const auto& v : cases.values()) {
    const auto& f = v.struct_value().fields();
    GenerateRequest req;
    req.set_model("stories");
    req.add_parts()->set_text(f.at("prompt").string_value());
    req.mutable_sampling()->set_temperature(0);
    std::vector<int32_t> want;
    for (const auto& t : f.at("tokens").list_value().values()) want.push_back(static_cast<int32_t>(t.number_value()));
    req.mutable_stop()->set_max_tokens(static_cast<int32_t>(want.size()));
    Result r = c.Generate(req);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.ids, want) << f.at("prompt").string_value();
    EXPECT_EQ(r.text, f.at("text").string_value());
  }
}

}  // namespace
}  // namespace cairn::service::e2e
