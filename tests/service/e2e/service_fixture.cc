#include "tests/service/e2e/service_fixture.h"

#include <chrono>
#include <fstream>
#include <thread>
#include <utility>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "service/host/log.h"
#include "service/host/models.h"
#include "service/programs/demo_catalog.h"

namespace cairn::service::e2e {
namespace {

// The access log (one info line per call) would bury the test output; its
// format is tested on a real server by observability_test.py.
const bool kQuietAccessLog = [] {
  SetLogLevel(LogLevel::kWarning);
  return true;
}();

}  // namespace

ServerOptions TestServerOptions() {
  ServerOptions opt;
  opt.listen = "127.0.0.1:0";
  opt.models_options.builtin = DemoModelCatalog();
  return opt;
}

std::unique_ptr<Server> ServeGguf(const std::string& name, const std::vector<uint8_t>& gguf, const std::string& dir) {
  const std::string path = dir + "/" + name + ".gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(gguf.data()), gguf.size());
  ServerOptions opt = TestServerOptions();
  auto spec = ParseModelSpec(name + "=" + path);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  opt.models = {*spec};
  auto server = Server::Create(opt);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

Client::Client(int port, std::string token)
    : Client(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()),
             std::move(token)) {}

Client::Client(std::shared_ptr<grpc::Channel> channel, std::string token)
    : channel_(std::move(channel)), stub_(v1::Inference::NewStub(channel_)), token_(std::move(token)) {}

void Client::Prepare(grpc::ClientContext& ctx) const {
  if (!token_.empty()) ctx.AddMetadata("authorization", "Bearer " + token_);
}

grpc::Status Client::ListModels(v1::ListModelsResponse* resp) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  return stub_->ListModels(&ctx, {}, resp);
}

Result Client::Generate(const GenerateRequest& req, double deadline_s,
                        std::function<void(grpc::ClientContext&, int)> on_token) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  if (deadline_s > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
  }
  Result r;
  auto reader = stub_->Generate(&ctx, req);
  v1::GenerateResponse ev;
  while (reader->Read(&ev)) {
    ++r.messages;
    if (ev.has_prompt()) {
      r.prompt_first = r.messages == 1;
      r.has_prompt = true;
      r.prompt = ev.prompt();
    } else if (ev.has_token()) {
      r.ids.push_back(ev.token().id());
      if (ev.token().has_logprob()) r.logprobs.push_back(ev.token().logprob());
      r.text += ev.token().text();
      if (on_token) on_token(ctx, static_cast<int>(r.ids.size()));
    } else if (ev.has_finished()) {
      r.has_finished = true;
      r.finished = ev.finished();
      r.text += ev.finished().text();
    }
  }
  r.status = reader->Finish();
  return r;
}

grpc::Status Client::Session(const v1::SessionRequest& req, v1::SessionResponse* resp) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  return stub_->SessionControl(&ctx, req, resp);
}

std::string Client::Create(const std::string& model) {
  v1::SessionRequest req;
  req.mutable_create()->set_model(model);
  return NewSession(req);
}

std::string Client::Fork(const std::string& id) {
  v1::SessionRequest req;
  req.mutable_fork()->set_session_id(id);
  return NewSession(req);
}

std::string Client::NewSession(const v1::SessionRequest& req) {
  v1::SessionResponse resp;
  grpc::Status st = Session(req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.session().session_id();
}

grpc::StatusCode Client::Rewind(const std::string& id, int n) {
  v1::SessionRequest req;
  req.mutable_rewind()->set_session_id(id);
  req.mutable_rewind()->set_tokens(n);
  v1::SessionResponse resp;
  return Session(req, &resp).error_code();
}

absl::StatusOr<v1::SessionInfo> Client::Get(const std::string& id, bool tokens) {
  v1::SessionRequest req;
  req.mutable_get()->set_session_id(id);
  req.mutable_get()->set_include_tokens(tokens);
  v1::SessionResponse resp;
  grpc::Status st = Session(req, &resp);
  if (!st.ok()) return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  return resp.session();
}

v1::SessionInfo Client::GetIdle(const std::string& id) {
  for (;;) {
    auto s = Get(id);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok() || !s->busy()) return s.ok() ? *s : v1::SessionInfo();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string SessionWithOneTurn(Client& client, const char* model, std::vector<int32_t>* history) {
  const std::string sid = client.Create(model);
  GenerateRequest turn = Req(model, Ids(6), 3);
  turn.set_session_id(sid);
  turn.set_append(true);
  EXPECT_TRUE(client.Generate(turn).status.ok());
  const v1::SessionInfo info = client.GetIdle(sid);
  history->assign(info.token_ids().begin(), info.token_ids().end());
  EXPECT_EQ(history->size(), 6u + 3u);
  return sid;
}

GenerateRequest Req(const std::string& model, std::vector<int32_t> ids, int max_tokens, float temperature) {
  GenerateRequest r;
  r.set_model(model);
  auto* t = r.add_parts()->mutable_tokens();
  for (int32_t id : ids) t->add_ids(id);
  r.mutable_stop()->set_max_tokens(max_tokens);
  r.mutable_stop()->set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(temperature);
  r.mutable_sampling()->set_seed(7);
  return r;
}

std::vector<int32_t> Ids(int n, int32_t base) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(base + (i * 37) % 200);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Server* ServiceTest::server_ = nullptr;

void ServiceTest::SetUpTestSuite() {
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 2;
  opt.sessions.max_sessions = 64;
  auto s = Server::Create(opt);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = s->release();
}

void ServiceTest::TearDownTestSuite() {
  delete server_;
  server_ = nullptr;
}

void ServiceTest::SetUp() {
  ASSERT_NE(server_, nullptr);
  client_ = std::make_unique<Client>(server_->port());
}

}  // namespace cairn::service::e2e
