#include "service/http/http_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "service/http/connection_pool.h"
#include "service/http/connection_stream.h"
#include "service/http/http_sink.h"
#include "service/http/openai_reply.h"
#include "service/http/openai_request.h"

namespace cairn::service::http {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting connection thread looks at its peer and at Stop.
constexpr absl::Duration kPoll = absl::Milliseconds(100);
// How long, and how many bytes, a connection closed before its request's
// body was read drains that body (DrainBeforeClose).
constexpr std::chrono::seconds kDrainTime{2};
constexpr size_t kDrainBytes = size_t{64} << 20;
// A request's line and headers, at most (httplib bounds each line to 8 KiB,
// not their number).
constexpr size_t kMaxHeadBytes = size_t{256} << 10;

// httplib's server with cairn's connection handling: each connection's
// bytes go through a ConnectionStream, whose deadline bounds the time a
// request may take to arrive (httplib bounds only each read), and which
// carries TLS when there is a context.
class GuardedServer final : public httplib::Server {
 public:
  GuardedServer(const HttpOptions& options, const std::atomic<bool>* stopping, TlsContext* tls)
      : options_(options), stopping_(stopping), tls_(tls) {}

  // httplib listens with a backlog of 5: connections beyond the pool would
  // be dropped at once under a burst. A second listen() only raises it.
  bool RaiseBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }

 private:
  bool process_and_close_socket(int sock) override {
    bool unread_body = false;
    bool ok = Serve(sock, &unread_body);
    if (unread_body) DrainBeforeClose(sock);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  // A response sent before its request's body was read (an error): closing
  // with those bytes unread would reset the connection, and the client,
  // still sending, could lose the response. So the server stops writing and
  // reads what still arrives, discarding it, until the client closes or a
  // bound passes (nothing is kept: no memory grows).
  static void DrainBeforeClose(int sock) {
    ::shutdown(sock, SHUT_WR);
    const Clock::time_point until = Clock::now() + kDrainTime;
    char scrap[16 << 10];
    for (size_t drained = 0; drained < kDrainBytes && Clock::now() < until;) {
      pollfd p{sock, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kPoll))) < 0 && errno != EINTR) return;
      if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::recv(sock, scrap, sizeof scrap, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
      if (n > 0) drained += static_cast<size_t>(n);
    }
  }

  bool Serve(int sock, bool* unread_body) {
    ConnectionStream stream(sock, options_.io_timeout);
    // The TLS handshake and the first request share one deadline.
    stream.ReadBy(Clock::now() + options_.request_timeout, RequestBytes());
    if (tls_ != nullptr) {
      absl::StatusOr<SslSession> session = tls_->NewSession(sock);
      if (!session.ok() || !stream.StartTls(*std::move(session))) return false;
    }
    ConnectionStream::SetCurrent(&stream);
    bool ok = true;
    for (size_t n = 0; n < options_.keep_alive_requests && ok; ++n) {
      if (n > 0) {
        if (!AwaitNextRequest(stream)) break;
        stream.ReadBy(Clock::now() + options_.request_timeout, RequestBytes());
      }
      bool closed = false;
      ok = process_request(stream, n + 1 == options_.keep_alive_requests || stopping_->load(), closed, nullptr);
      if (closed || stream.read_refused() || stream.end_after_response()) break;
    }
    *unread_body = stream.end_after_response();
    ConnectionStream::SetCurrent(nullptr);
    return ok;
  }

  // An idle keep-alive connection: its next request's first byte, within
  // keep_alive, unless the server stops.
  bool AwaitNextRequest(const ConnectionStream& stream) const {
    if (stream.HasBuffered()) return true;
    const Clock::time_point until = Clock::now() + options_.keep_alive;
    while (!stopping_->load() && Clock::now() < until) {
      pollfd p{stream.socket(), POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kPoll)));
      if (r > 0) return (p.revents & POLLIN) != 0;
      if (r < 0 && errno != EINTR) return false;
    }
    return false;
  }

  // What one request may send before it is served: its body's limit and
  // kMaxHeadBytes for its line and headers.
  size_t RequestBytes() const { return options_.max_body_bytes + kMaxHeadBytes; }

  const HttpOptions options_;
  const std::atomic<bool>* const stopping_;
  TlsContext* const tls_;  // null: plain HTTP
};

// `http_status` 0: the status's own (httplib's refusals bring theirs, none
// worth a retry).
void Reply(httplib::Response& res, const absl::Status& status, int http_status = 0) {
  res.status = http_status != 0 ? http_status : HttpStatusOf(status);
  // The openai SDKs retry by status (409, 429, 5xx) unless told otherwise,
  // and honour Retry-After.
  const bool retry = http_status == 0 && IsRetryable(status);
  res.set_header("x-should-retry", retry ? "true" : "false");
  if (retry) res.set_header("Retry-After", "1");
  res.set_content(ErrorJson(status, res.status), "application/json");
}

// The request's deadline: X-Cairn-Timeout-Ms (1 ms to a day), else the
// server's default (none when 0).
absl::StatusOr<std::chrono::system_clock::time_point> DeadlineOf(const httplib::Request& req,
                                                                 std::chrono::milliseconds default_timeout) {
  std::chrono::milliseconds timeout = default_timeout;
  if (req.has_header("X-Cairn-Timeout-Ms")) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(req.get_header_value("X-Cairn-Timeout-Ms"), &ms) || ms < 1 ||
        ms > HttpOptions::kMaxTimeoutMs) {
      return absl::InvalidArgumentError(
          absl::StrCat("X-Cairn-Timeout-Ms: expected milliseconds from 1 to ", HttpOptions::kMaxTimeoutMs));
    }
    timeout = std::chrono::milliseconds(ms);
  }
  if (timeout.count() == 0) return std::chrono::system_clock::time_point::max();
  return std::chrono::system_clock::now() + timeout;
}

// "HOST:PORT" or "[V6]:PORT" split.
absl::StatusOr<std::pair<std::string, int>> SplitAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen '", listen, "': expected HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  return std::make_pair(host, port);
}

std::optional<std::string> Authorization(const httplib::Request& req) {
  if (!req.has_header("Authorization")) return std::nullopt;
  return req.get_header_value("Authorization");
}

}  // namespace

struct Completion;

// The routes and what they share; one instance per server.
class HttpServer::Routes {
 public:
  Routes(HttpOptions options, InferenceService* service, ModelRegistry* models, const Authenticator* auth)
      : options_(std::move(options)), service_(service), models_(models), auth_(auth) {}

  const HttpOptions& options() const { return options_; }
  std::atomic<bool>& stopping() { return stopping_; }

  void Install(httplib::Server& server) {
    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
    server.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
    // The completions read their bodies themselves (a ContentReader): httplib
    // would refuse an application/x-www-form-urlencoded body (what `curl -d`
    // sends) beyond 8 KiB with a 413, and the body is JSON whatever its
    // Content-Type says. (httplib hands every POST to a ContentReader
    // handler, bodiless ones too: they read as "".)
    for (const auto& [path, endpoint] : {std::pair{"/v1/chat/completions", OpenAiEndpoint::kChatCompletions},
                                         std::pair{"/v1/completions", OpenAiEndpoint::kCompletions}}) {
      server.Post(path, [this, path, endpoint](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& content) {
        std::string body;
        if (absl::Status read = ReadBody(req, content, res, &body); !read.ok()) return;
        Complete(endpoint, path, req, body, res);
      });
    }
    // Unknown routes, and httplib's own refusals (413 for a body beyond the
    // limit, 400 for a malformed request), in OpenAI's error shape.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a route's own error
      absl::Status st = res.status == 404   ? absl::NotFoundError(absl::StrCat("no route ", req.method, " ", req.path))
                        : res.status == 413 ? absl::ResourceExhaustedError("request body too large")
                                            : absl::InvalidArgumentError("malformed HTTP request");
      Reply(res, st, res.status);
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      Reply(res, absl::InternalError("internal error"));
    });
  }

 private:
  // The request has arrived: what follows is bounded by the call itself.
  static void Arrived() {
    if (ConnectionStream* s = ConnectionStream::Current()) s->Unbounded();
  }
  static bool PeerClosed() {
    ConnectionStream* s = ConnectionStream::Current();
    return s != nullptr && s->PeerClosed();
  }

  void Health(httplib::Response& res) const {
    Arrived();
    const bool serving = service_->accepting() && !stopping_.load();
    res.status = serving ? 200 : 503;
    res.set_content(serving ? R"({"status":"ok"})" : R"({"status":"draining"})", "application/json");
  }

  void Models(const httplib::Request& req, httplib::Response& res) const {
    Arrived();
    auto auth = Authorization(req);
    if (absl::StatusOr<Caller> c = auth_->Authenticate(auth ? std::optional<std::string_view>(*auth) : std::nullopt);
        !c.ok()) {
      return Reply(res, c.status());
    }
    nlohmann::json data = nlohmann::json::array();
    for (ServedModel* m : models_->All()) {
      data.push_back({{"id", m->name}, {"object", "model"}, {"created", 0}, {"owned_by", "cairn"}});
    }
    res.set_content(nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump(), "application/json");
  }

  // The request's body into `body`, within max_body_bytes (httplib bounds
  // only a declared Content-Length, not a chunked body). On failure the
  // response is the error (413 beyond the limit, 400 for a body cut short
  // or multipart) and the connection ends after it.
  absl::Status ReadBody(const httplib::Request& req, const httplib::ContentReader& content, httplib::Response& res,
                        std::string* body) const;
  void Complete(OpenAiEndpoint endpoint, const char* method, const httplib::Request& req, const std::string& body,
                httplib::Response& res);
  bool StreamStep(Completion& c, httplib::DataSink& out);
  const HttpOptions options_;
  InferenceService* const service_;
  ModelRegistry* const models_;
  const Authenticator* const auth_;
  std::atomic<bool> stopping_{false};
};

// One completion in flight: the call, its sink and the reply being built.
struct Completion {
  OpenAiRequest request;
  std::shared_ptr<HttpSink> sink;
  std::shared_ptr<GenerateStream> call;
  std::optional<OpenAiReply> reply;
  std::string unsent;  // stream events made before the response began
  bool ended = false;  // the call's end was taken

  // The client is gone (or the server stops): the call is cancelled and
  // acknowledged from now on without anyone reading.
  void Abandon() {
    if (!ended) sink->Detach(call);
    ended = true;
  }
};

absl::Status HttpServer::Routes::ReadBody(const httplib::Request& req, const httplib::ContentReader& content,
                                          httplib::Response& res, std::string* body) const {
  absl::Status st;
  int http_status = 400;
  bool too_large = false;
  if (req.is_multipart_form_data()) {
    st = absl::InvalidArgumentError("a multipart/form-data body: send the request as JSON");
  } else if (!content([&](const char* data, size_t n) {
               if (n > options_.max_body_bytes - body->size()) {
                 too_large = true;
                 return false;
               }
               body->append(data, n);
               return true;
             })) {
    // httplib's status is 413 when a Content-Length is beyond the limit.
    if (too_large || res.status == 413) {
      http_status = 413;
      st = absl::ResourceExhaustedError("request body too large");
    } else {
      st = absl::InvalidArgumentError("the request body ended before its length");
    }
  }
  if (st.ok()) return st;
  if (ConnectionStream* s = ConnectionStream::Current()) s->EndAfterResponse();
  res.set_header("Connection", "close");
  Reply(res, st, http_status);
  return st;
}

void HttpServer::Routes::Complete(OpenAiEndpoint endpoint, const char* method, const httplib::Request& req,
                                  const std::string& body, httplib::Response& res) {
  Arrived();
  const std::optional<std::string> authorization = Authorization(req);
  // Credentials first: an unauthenticated client learns nothing about its body.
  if (absl::StatusOr<Caller> c =
          auth_->Authenticate(authorization ? std::optional<std::string_view>(*authorization) : std::nullopt);
      !c.ok()) {
    return Reply(res, c.status());
  }
  // JSON values take up to ~30x their text: a large body is parsed under
  // the service's bound on such work (large_work_gate.h), not 64 at once.
  absl::StatusOr<OpenAiRequest> parsed = service_->large_work().Run(
      body.size(), [&] { return ParseOpenAiRequest(endpoint, body, req.get_header_value("X-Cairn-Session")); });
  if (!parsed.ok()) return Reply(res, parsed.status());
  absl::StatusOr<std::chrono::system_clock::time_point> deadline = DeadlineOf(req, options_.default_timeout);
  if (!deadline.ok()) return Reply(res, deadline.status());
  auto c = std::make_shared<Completion>();
  c->request = *std::move(parsed);
  c->sink = std::make_shared<HttpSink>(method, authorization, c->request.generate, *deadline);
  const std::string& model = c->request.generate.model();
  absl::StatusOr<ServedModel*> served = models_->Find(model);
  c->reply.emplace(c->request, model, served.ok() ? (*served)->tokenizer.get() : nullptr,
                   static_cast<int64_t>(std::time(nullptr)));
  c->call = service_->StartGenerate(c->sink, c->sink->request());
  // Until the first message (the prompt's statistics) or the end: the
  // status of a request refused at its start is the response's.
  for (;;) {
    if (PeerClosed() || stopping_.load()) return c->Abandon();
    HttpSink::Next next = c->sink->Take(kPoll);
    if (next.kind == HttpSink::Next::kNothingYet) continue;
    if (next.kind == HttpSink::Next::kEnd) {
      c->ended = true;
      return Reply(res, next.status.ok() ? absl::InternalError("the call ended without a reply") : next.status);
    }
    c->unsent = c->reply->Add(next.message);
    c->call->WriteDone(true);
    break;
  }
  if (c->request.stream) {
    res.set_chunked_content_provider(
        "text/event-stream", [this, c](size_t, httplib::DataSink& out) { return StreamStep(*c, out); },
        [c](bool) { c->Abandon(); });
    res.set_header("Cache-Control", "no-cache");
    return;
  }
  for (;;) {
    if (PeerClosed() || stopping_.load()) return c->Abandon();
    HttpSink::Next next = c->sink->Take(kPoll);
    if (next.kind == HttpSink::Next::kNothingYet) continue;
    if (next.kind == HttpSink::Next::kMessage) {
      c->reply->Add(next.message);
      c->call->WriteDone(true);
      continue;
    }
    c->ended = true;
    if (!next.status.ok()) return Reply(res, next.status);
    if (next.has_final) c->reply->Add(next.message);
    res.set_content(c->reply->Body(), "application/json");
    return;
  }
}

// One step of a streamed reply: the next message's events, or the end.
// False stops the stream (the client is gone).
bool HttpServer::Routes::StreamStep(Completion& c, httplib::DataSink& out) {
  if (!c.unsent.empty()) {
    const bool ok = out.write(c.unsent.data(), c.unsent.size());
    c.unsent.clear();
    if (!ok) return false;
  }
  if (stopping_.load()) return false;
  HttpSink::Next next = c.sink->Take(kPoll);
  if (next.kind == HttpSink::Next::kNothingYet) return true;  // httplib checks the peer, then calls again
  if (next.kind == HttpSink::Next::kMessage) {
    const std::string events = c.reply->Add(next.message);
    const bool ok = events.empty() || out.write(events.data(), events.size());
    c.call->WriteDone(ok && !c.sink->aborted());
    return ok;
  }
  c.ended = true;
  std::string tail;
  if (next.status.ok()) {
    if (next.has_final) tail = c.reply->Add(next.message);
    tail += c.reply->StreamEnd();
  } else {
    tail = OpenAiReply::StreamError(next.status);
  }
  out.write(tail.data(), tail.size());
  out.done();
  return true;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(HttpOptions options, InferenceService* service,
                                                               ModelRegistry* models, const Authenticator* auth) {
  auto address = SplitAddress(options.listen);
  if (!address.ok()) return address.status();
  std::unique_ptr<HttpServer> s(new HttpServer());
  if (!options.tls.cert.empty() || !options.tls.key.empty()) {
    absl::StatusOr<std::unique_ptr<TlsContext>> tls = TlsContext::Create(options.tls);
    if (!tls.ok()) return tls.status();
    s->tls_ = *std::move(tls);
  }
  s->routes_ = std::make_unique<Routes>(std::move(options), service, models, auth);
  const HttpOptions& o = s->routes_->options();
  auto server = std::make_unique<GuardedServer>(o, &s->routes_->stopping(), s->tls_.get());
  server->set_payload_max_length(o.max_body_bytes);
  server->set_keep_alive_max_count(o.keep_alive_requests);
  server->set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(o.keep_alive).count());
  server->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o.io_timeout));
  server->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o.io_timeout));
  server->new_task_queue = [threads = o.threads, queued = o.queued_connections] {
    return new ConnectionPool(threads, queued);
  };
  s->routes_->Install(*server);
  const auto& [host, port] = *address;
  s->port_ = port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  if (s->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http-listen ", o.listen, ": cannot listen (address in use or invalid)"));
  }
  server->RaiseBacklog();
  s->server_ = std::move(server);
  s->thread_ = std::thread([server = s->server_.get()] { server->listen_after_bind(); });
  return s;
}

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  routes_->stopping().store(true);
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace cairn::service::http
