// The HTTP door of a real in-process server over real sockets (port 0),
// driven by httplib's client, with the same server's gRPC API as the
// reference: greedy replies equal, usage and cached tokens, streaming,
// errors in OpenAI's shape, bearer tokens, body limits, and a client that
// disconnects mid-stream (the request is cancelled; its session unchanged).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

using Json = nlohmann::json;

struct HttpReply {
  int status = 0;
  std::string body;
  Json json() const { return Json::parse(body, nullptr, false); }
};

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    opt.http.listen = "127.0.0.1:0";
    opt.http.max_body_bytes = 1 << 20;
    absl::StatusOr<std::unique_ptr<Server>> created = Server::Create(opt);
    ASSERT_TRUE(created.ok()) << created.status();
    server_ = *std::move(created);
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { grpc_ = std::make_unique<Client>(server_->port()); }

  static HttpReply Send(const std::string& method, const std::string& path, const std::string& body = "",
                        httplib::Headers headers = {}) {
    httplib::Client cli("127.0.0.1", server_->http_port());
    cli.set_read_timeout(60, 0);
    httplib::Result r =
        method == "GET" ? cli.Get(path.c_str(), headers) : cli.Post(path.c_str(), headers, body, "application/json");
    if (!r) return {};
    return {r->status, r->body};
  }
  // A streamed request: the data of each server-sent event, in order.
  // `stop_after` events, the client disconnects.
  static std::vector<std::string> Stream(const std::string& path, const Json& body, httplib::Headers headers = {},
                                         size_t stop_after = 0) {
    httplib::Client cli("127.0.0.1", server_->http_port());
    cli.set_read_timeout(60, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = std::move(headers);
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    std::string buffer;
    std::vector<std::string> events;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
        const std::string event = buffer.substr(0, end);
        buffer.erase(0, end + 2);
        if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
      }
      return stop_after == 0 || events.size() < stop_after;
    };
    cli.send(req);
    return events;
  }
  static Json Chat(const std::string& text, int max_tokens) {
    return {{"model", kChat},
            {"messages", {{{"role", "user"}, {"content", text}}}},
            {"temperature", 0},
            {"max_tokens", max_tokens}};
  }
  // The same conversation through gRPC, greedy: the parsed reply's content
  // and the final message.
  struct GrpcReply {
    grpc::Status status;
    std::string content;
    v1::Finished finished;
  };
  GrpcReply GrpcChat(const std::string& text, int max_tokens) {
    GenerateRequest req;
    req.set_model(kChat);
    v1::ChatMessage* m = req.add_messages();
    m->set_role("user");
    m->set_content(text);
    req.mutable_sampling()->set_temperature(0);
    req.mutable_stop()->set_max_tokens(max_tokens);
    grpc::ClientContext ctx;
    auto reader = grpc_->stub().Generate(&ctx, req);
    GrpcReply r;
    auto add = [&r](const auto& pieces) {
      for (const v1::OutputPiece& p : pieces) {
        if (p.kind() == v1::OUTPUT_KIND_CONTENT) r.content += p.text();
      }
    };
    for (v1::GenerateResponse ev; reader->Read(&ev);) {
      if (ev.has_token()) add(ev.token().pieces());
      if (ev.has_finished()) {
        add(ev.finished().pieces());
        r.finished = ev.finished();
      }
    }
    r.status = reader->Finish();
    return r;
  }

  // On a plain socket (for requests httplib's client will not send):
  // `head`, then `piece` again and again, byte after byte as one stream,
  // until the server answers or closes, or `offered` bytes of pieces went.
  // What the server sent back; `sent`: the bytes of pieces sent.
  static std::string SendUntilAnswered(const std::string& head, const std::string& piece, size_t offered,
                                       size_t* sent) {
    *sent = 0;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->http_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
      ADD_FAILURE() << "cannot send a request's head to the HTTP port";
      if (fd >= 0) ::close(fd);
      return "";
    }
    while (*sent < offered) {
      pollfd p{fd, POLLIN | POLLOUT, 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) break;  // answered or closed
      const size_t at = *sent % piece.size();
      const ssize_t n = ::send(fd, piece.data() + at, piece.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN) break;
      if (n > 0) *sent += static_cast<size_t>(n);
    }
    std::string response;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return response;
  }

  static std::unique_ptr<Server> server_;
  std::unique_ptr<Client> grpc_;
};

std::unique_ptr<Server> HttpTest::server_;

TEST_F(HttpTest, HealthAndModels) {
  EXPECT_EQ(Send("GET", "/health").status, 200);
  const HttpReply models = Send("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const Json j = models.json();
  EXPECT_EQ(j["object"], "list");
  std::vector<std::string> ids;
  for (const Json& m : j["data"]) ids.push_back(m["id"]);
  EXPECT_NE(std::find(ids.begin(), ids.end(), kChat), ids.end());
}

// Greedy: the HTTP reply is the gRPC reply; the usage counts what gRPC's
// Finished counts, and a repeated conversation is served from the prefix
// cache (cached_tokens).
TEST_F(HttpTest, ChatCompletionEqualsGrpcReply) {
  const GrpcReply reference = GrpcChat("tell me about the sea", 12);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  const HttpReply r = Send("POST", "/v1/chat/completions", Chat("tell me about the sea", 12).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], kChat);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], reference.content);
  EXPECT_EQ(j["usage"]["prompt_tokens"], reference.finished.usage().prompt_tokens());
  EXPECT_EQ(j["usage"]["completion_tokens"], reference.finished.usage().completion_tokens());
  EXPECT_EQ(j["usage"]["total_tokens"],
            reference.finished.usage().prompt_tokens() + reference.finished.usage().completion_tokens());
  // The gRPC request computed this prompt: the HTTP one reused it.
  EXPECT_GT(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"],
            reference.finished.reason() == v1::FINISH_REASON_LENGTH ? "length" : "stop");
}

TEST_F(HttpTest, StreamedChatEqualsTheWholeReply) {
  const HttpReply whole = Send("POST", "/v1/chat/completions", Chat("a story of ships", 10).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json body = Chat("a story of ships", 10);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const std::vector<std::string> events = Stream("/v1/chat/completions", body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string content;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const Json chunk = Json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const Json& choice = chunk["choices"][0];
    if (i == 0) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
    }
    if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, whole.json()["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, whole.json()["choices"][0]["finish_reason"]);
  const Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], whole.json()["usage"]["completion_tokens"]);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], whole.json()["usage"]["prompt_tokens"]);
  // The whole reply computed this prompt just before: the stream reused it.
  EXPECT_GT(usage["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_LE(usage["usage"]["prompt_tokens_details"]["cached_tokens"], usage["usage"]["prompt_tokens"]);
}

TEST_F(HttpTest, CompletionFromTokenIdsEqualsGrpc) {
  const std::vector<int32_t> ids = Ids(6);
  GenerateRequest req = Req(kTf, ids, 5);
  req.mutable_stop()->set_ignore_eos(false);
  const Result reference = grpc_->Generate(req);
  ASSERT_TRUE(reference.status.ok());
  const Json body = {{"model", kTf}, {"prompt", ids}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}};
  const HttpReply r = Send("POST", "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], reference.text);
  EXPECT_EQ(j["usage"]["completion_tokens"], reference.finished.usage().completion_tokens());
  EXPECT_EQ(j["choices"][0]["logprobs"]["token_logprobs"].size(), reference.ids.size());
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
}

TEST_F(HttpTest, ErrorsHaveOpenAisShapeAndStatus) {
  const struct {
    std::string path, body;
    int status;
  } cases[] = {
      {"/v1/chat/completions", "{not json", 400},
      {"/v1/chat/completions", Json{{"model", "nope"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}.dump(),
       404},
      {"/v1/chat/completions",
       Json{{"model", kChat}, {"n", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}.dump(), 400},
      {"/v1/completions", Json{{"model", kTf}, {"prompt", {999999}}}.dump(), 400},
      {"/v1/embeddings", "{}", 404},
      {"/v1/chat/completions", std::string(2 << 20, ' '), 413},
  };
  for (const auto& c : cases) {
    const HttpReply r = Send("POST", c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 80) << " -> " << r.body;
    const Json j = r.json();
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_TRUE(j["error"]["type"].is_string()) << r.body;
    EXPECT_TRUE(j["error"].contains("param")) << r.body;
    EXPECT_TRUE(j["error"]["code"].is_string()) << r.body;
  }
  // The server answers as before.
  EXPECT_EQ(Send("POST", "/v1/chat/completions", Chat("still here", 2).dump()).status, 200);
}

// The body is JSON whatever its Content-Type says: `curl -d` sends
// application/x-www-form-urlencoded, and a conversation of more than 8 KiB
// (httplib's own cap on form bodies) is still a completion, not a 413. A
// multipart body is refused by name, and the connection serves on.
TEST_F(HttpTest, BodiesAreJsonWhateverTheirContentType) {
  // More than 8 KiB of JSON (a field the server accepts and ignores, so the
  // prompt stays within demo-chat's context).
  Json chat = Chat("a story of ships", 2);
  chat["user"] = std::string(12 << 10, 'u');
  const std::string body = chat.dump();
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    httplib::Client cli("127.0.0.1", server_->http_port());
    cli.set_read_timeout(60, 0);
    httplib::Result r = cli.Post("/v1/chat/completions", body, type);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 200) << type << " -> " << r->body;
    EXPECT_EQ(Json::parse(r->body, nullptr, false)["choices"][0]["finish_reason"], "length") << type << r->body;
  }
  httplib::Client cli("127.0.0.1", server_->http_port());
  cli.set_read_timeout(60, 0);
  httplib::Result r = cli.Post("/v1/chat/completions", "--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("JSON"), std::string::npos) << r->body;
  r = cli.Post("/v1/completions", "", "application/json");  // no body at all
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("not valid JSON"), std::string::npos) << r->body;
  r = cli.Post("/v1/chat/completions", Chat("still here", 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// A chunked body (no Content-Length to refuse up front) is bounded by the
// same limit as it arrives: 413 once past it, while the client is still
// sending (the server does not buffer the rest), and the client gets that
// response rather than a reset connection.
TEST_F(HttpTest, ChunkedBodiesAreBoundedAsTheyArrive) {
  const std::string chunk = "10000\r\n" + std::string(64 << 10, ' ') + "\r\n";
  constexpr size_t kOffered = size_t{64} << 20;  // far beyond the test server's 1 MiB
  size_t sent = 0;
  const std::string response = SendUntilAnswered(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      chunk, kOffered, &sent);
  EXPECT_EQ(response.rfind("HTTP/1.1 413", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("request body too large"), std::string::npos) << response.substr(0, 400);
  EXPECT_LT(sent, kOffered / 4);
  EXPECT_EQ(Send("POST", "/v1/chat/completions", Chat("still here", 2).dump()).status, 200);
}

// A compressed body (Content-Encoding: gzip, which httplib inflates) is
// bounded by what it inflates to: a few KiB of gzip that would become
// 64 MiB is refused at the 1 MiB limit, not inflated whole (a zip bomb).
TEST_F(HttpTest, CompressedBodiesAreBoundedByWhatTheyInflateTo) {
  httplib::Client cli("127.0.0.1", server_->http_port());
  cli.set_read_timeout(60, 0);
  cli.set_compress(true);  // gzip the body, Content-Encoding: gzip
  httplib::Result r = cli.Post("/v1/completions", std::string(64 << 20, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  // Within the limit, a gzip body is a completion like any other.
  r = cli.Post("/v1/chat/completions", Chat("still here", 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// Endless header lines (httplib bounds each line, not their number, and
// keeps them all) are cut off by the request's byte budget, its body's
// limit plus 256 KiB: a 400 once past it, not memory growing for as long as
// the request's 10 s allow.
TEST_F(HttpTest, EndlessHeadersAreCutOffByTheRequestsByteBudget) {
  std::string lines;
  while (lines.size() < (64 << 10)) lines += "X-Pad: " + std::string(4000, 'a') + "\r\n";
  constexpr size_t kOffered = size_t{64} << 20;  // the test server's budget: 1 MiB + 256 KiB
  size_t sent = 0;
  const std::string response =
      SendUntilAnswered("POST /v1/completions HTTP/1.1\r\nHost: x\r\n", lines, kOffered, &sent);
  EXPECT_LT(sent, kOffered / 4);
  if (!response.empty()) {  // a reset connection may lose the 400
    EXPECT_EQ(response.rfind("HTTP/1.1 400", 0), 0u) << response.substr(0, 200);
  }
  EXPECT_EQ(Send("POST", "/v1/chat/completions", Chat("still here", 2).dump()).status, 200);
}

// X-Cairn-Session runs the conversation on that session (created when new):
// a turn that completes becomes its history; a stream the client leaves
// changes nothing in it and is counted as cancelled.
TEST_F(HttpTest, SessionHeaderAndDisconnectCancels) {
  const httplib::Headers session = {{"X-Cairn-Session", "http-conv-1"}};
  const HttpReply first = Send("POST", "/v1/chat/completions", Chat("first turn", 4).dump(), session);
  ASSERT_EQ(first.status, 200) << first.body;
  const v1::SessionInfo after_first = grpc_->GetIdle("http-conv-1");
  EXPECT_EQ(after_first.tokens(),
            first.json()["usage"]["prompt_tokens"].get<int>() + first.json()["usage"]["completion_tokens"].get<int>());

  Json body = Chat("a long reply please", 100000);
  body["stream"] = true;
  const std::vector<std::string> events = Stream("/v1/chat/completions", body, session, 4);
  EXPECT_EQ(events.size(), 4u);
  const v1::SessionInfo after_cancel = grpc_->GetIdle("http-conv-1");
  EXPECT_EQ(after_cancel.tokens(), after_first.tokens());
  // Counted under the route's method label.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string metrics;
  while (std::chrono::steady_clock::now() < deadline) {
    metrics = server_->metrics().Render();
    if (metrics.find(R"(code="CANCELLED",method="/v1/chat/completions")") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(metrics.find(R"(code="CANCELLED",method="/v1/chat/completions")"), std::string::npos)
      << metrics.substr(metrics.find("cairn_requests_total"), 2000);
  EXPECT_NE(metrics.find(R"(code="OK",method="/v1/chat/completions")"), std::string::npos);
}

// A stream cancelled on a session, and the next request on it sent at once:
// it waits for the cancelled one to end (bounded by its deadline) and
// succeeds, as on gRPC. A request truly concurrent with a running one gets
// 409 with Retry-After; a malformed X-Cairn-Timeout-Ms gets 400, a deadline
// that passes mid-generation 504.
TEST_F(HttpTest, NextRequestWaitsForACancelledOneAndConcurrentOnesGetARetryableConflict) {
  const httplib::Headers session = {{"X-Cairn-Session", "http-busy-1"}, {"X-Cairn-Timeout-Ms", "30000"}};
  Json body = Chat("a long reply please", 100000);
  body["stream"] = true;
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(Stream("/v1/chat/completions", body, session, 2).size(), 2u);
    const HttpReply next = Send("POST", "/v1/chat/completions", Chat("the next turn", 2).dump(), session);
    EXPECT_EQ(next.status, 200) << "round " << round << ": " << next.body;
  }

  // While a stream runs (its client reading), another request on its session.
  const httplib::Headers other = {{"X-Cairn-Session", "http-busy-2"}};
  httplib::Client streaming("127.0.0.1", server_->http_port());
  streaming.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = other;
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  int busy_status = 0;
  std::string busy_body, retry_after;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    httplib::Client cli("127.0.0.1", server_->http_port());
    if (httplib::Result r = cli.Post("/v1/chat/completions", other, Chat("concurrent", 2).dump(), "application/json")) {
      busy_status = r->status;
      busy_body = r->body;
      retry_after = r->get_header_value("Retry-After");
    }
    return false;
  };
  streaming.send(req);
  EXPECT_EQ(busy_status, 409) << busy_body;
  EXPECT_EQ(retry_after, "1");  // and x-should-retry: true (openai_reply_test.cc)
  EXPECT_EQ(Json::parse(busy_body, nullptr, false)["error"]["code"], "aborted");

  EXPECT_EQ(Send("POST", "/v1/chat/completions", Chat("x", 2).dump(), {{"X-Cairn-Timeout-Ms", "soon"}}).status, 400);
  const Json endless = {{"model", kTf}, {"prompt", Ids(4)}, {"max_tokens", 16000}, {"ignore_eos", true}};
  const HttpReply late = Send("POST", "/v1/completions", endless.dump(), {{"X-Cairn-Timeout-Ms", "300"}});
  EXPECT_EQ(late.status, 504) << late.body;
}

// Statuses as the openai SDKs read them: a prompt beyond the model's
// context is 400 context_length_exceeded (gRPC keeps RESOURCE_EXHAUSTED),
// not a 429 they would retry; what is not worth retrying says so.
TEST_F(HttpTest, ContextLengthIs400AndRetryHintsFollowTheStatus) {
  GenerateRequest too_long = Req(kTf, Ids(20000), 2);
  EXPECT_EQ(grpc_->Generate(too_long).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  httplib::Client cli("127.0.0.1", server_->http_port());
  const Json body = {{"model", kTf}, {"prompt", Ids(20000)}, {"max_tokens", 2}};
  httplib::Result r = cli.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const Json e = Json::parse(r->body, nullptr, false);
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded") << r->body;
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(r->get_header_value("x-should-retry"), "false");
  EXPECT_FALSE(r->has_header("Retry-After"));
  // Streamed: the same error as the response (it fails before the stream).
  Json streamed = body;
  streamed["stream"] = true;
  r = cli.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  // A body beyond the limit (413) is not worth a retry either.
  r = cli.Post("/v1/chat/completions", std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->get_header_value("x-should-retry"), "false");
  EXPECT_EQ(Json::parse(r->body)["error"]["type"], "invalid_request_error") << r->body;  // not a rate limit
}

TEST(HttpAuthTest, BearerTokensAsGrpc) {
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 1;
  opt.http.listen = "127.0.0.1:0";
  opt.auth_tokens = {"s3cret"};
  auto s = Server::Create(opt);
  ASSERT_TRUE(s.ok()) << s.status();
  httplib::Client cli("127.0.0.1", (*s)->http_port());
  const std::string body = Json{{"model", kTf}, {"prompt", {1, 2, 3}}, {"max_tokens", 2}}.dump();
  auto none = cli.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(Json::parse(none->body)["error"]["type"], "authentication_error");
  auto wrong = cli.Post("/v1/completions", {{"Authorization", "Bearer nope"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  auto good = cli.Post("/v1/completions", {{"Authorization", "Bearer s3cret"}}, body, "application/json");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
}

TEST(HttpOptionsTest, AddressErrors) {
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 1;
  opt.http.listen = "no-port";
  EXPECT_EQ(Server::Create(opt).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::service::e2e
