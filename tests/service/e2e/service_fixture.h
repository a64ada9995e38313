// What the end-to-end tests share: a real cairn server (built-in synthetic
// models) on a real socket (127.0.0.1, port 0), driven through the
// generated C++ client (Client), request helpers, and ServiceTest, the
// fixture whose one server serves every ServiceTest (and derived) test.
#ifndef CAIRN_TESTS_SERVICE_E2E_SERVICE_FIXTURE_H_
#define CAIRN_TESTS_SERVICE_E2E_SERVICE_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "service/server.h"

namespace cairn::service::e2e {

using v1::GenerateRequest;

inline constexpr const char* kTf = "demo-transformer";
inline constexpr const char* kRec = "demo-recurrent";
inline constexpr const char* kHyb = "demo-hybrid";
inline constexpr const char* kChat = "demo-chat";  // demo-transformer's shape with ChatML

// ServerOptions for an in-process test server: 127.0.0.1, port 0, the
// built-in demo models (all of them unless `models` is set).
ServerOptions TestServerOptions();

// A server (TestServerOptions) of one model, `name`, read from `gguf`'s
// bytes written into the folder `dir`; null (and a test failure) when it
// does not start.
std::unique_ptr<Server> ServeGguf(const std::string& name, const std::vector<uint8_t>& gguf, const std::string& dir);

// One Generate stream, read to its end.
struct Result {
  grpc::Status status;
  bool has_prompt = false;
  bool prompt_first = false;
  v1::PromptInfo prompt;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;  // when requested
  std::string text;
  bool has_finished = false;
  v1::Finished finished;
  int messages = 0;
};

class Client {
 public:
  explicit Client(int port, std::string token = "");
  Client(std::shared_ptr<grpc::Channel> channel, std::string token);

  void Prepare(grpc::ClientContext& ctx) const;
  grpc::Status ListModels(v1::ListModelsResponse* resp);
  // Reads the whole stream. `on_token`, when set, is called with the
  // context after each token (to cancel).
  Result Generate(const GenerateRequest& req, double deadline_s = 0,
                  std::function<void(grpc::ClientContext&, int)> on_token = nullptr);
  grpc::Status Session(const v1::SessionRequest& req, v1::SessionResponse* resp);
  // Create and Fork return the new session's id ("" after a failure, which
  // the test sees).
  std::string Create(const std::string& model);
  std::string Fork(const std::string& id);
  std::string NewSession(const v1::SessionRequest& req);
  grpc::StatusCode Rewind(const std::string& id, int n);
  absl::StatusOr<v1::SessionInfo> Get(const std::string& id, bool tokens = true);
  // Waits until the server has released the session after a stopped call
  // (the server finishes its side asynchronously).
  v1::SessionInfo GetIdle(const std::string& id);
  grpc::Channel& channel() { return *channel_; }
  v1::Inference::Stub& stub() { return *stub_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::string token_;
};

// A request for `max_tokens` tokens after the token ids, greedy unless a
// temperature is given (seed 7), end-of-generation ignored.
GenerateRequest Req(const std::string& model, std::vector<int32_t> ids, int max_tokens, float temperature = 0.0f);
// n token ids from `base` (a spread of the demo vocabulary's words).
std::vector<int32_t> Ids(int n, int32_t base = 300);
std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b);
// A session on `model` with one completed turn (6 prompt tokens, 3 greedy
// ones); returns its id and fills `history` with what it holds.
std::string SessionWithOneTurn(Client& client, const char* model, std::vector<int32_t>* history);

// One server for the whole suite (every built-in model, 2 threads each, 64
// sessions at most); a client per test.
class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  static Server* server_;
  std::unique_ptr<Client> client_;
};

}  // namespace cairn::service::e2e

#endif  // CAIRN_TESTS_SERVICE_E2E_SERVICE_FIXTURE_H_
