// cairn-cli: chat with a cairn server, or run one prompt for scripts.
//
//   cairn-cli [--server=HOST:PORT] [--model=NAME] "Once upon a time"   one shot
//   cairn-cli [--model=NAME] --chat [--system=TEXT] "Hello"            one chat turn
//   cairn-cli [--server=HOST:PORT] [--model=NAME]                      interactive chat
//   cairn-cli --health                                                 grpc.health.v1 check
//   cairn-cli --server=REPLICA --drain-to=PROXY                        move sessions away
//
// Interactive commands: /help, /fork, /rewind N, /stats, /sessions, /models,
// /quit; any other /word is refused here (a line starting with // sends the
// rest, from its second slash, as text).
//
// Every call about a session carries the affinity header x-cairn-session (see
// "Routing across replicas" in the proto): the interactive chat chooses its
// session's id itself, so that the create already routes where the session
// will live, and keeps that id as the key for the sessions it forks.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service/programs/client_channel.h"

namespace {

using cairn::v1::Inference;

const char kUsage[] = R"(cairn-cli: talk to a cairn server

  cairn-cli [flags] PROMPT...   one shot: stream the completion of PROMPT to stdout
  cairn-cli --chat [flags] PROMPT...
                                one chat turn: PROMPT as a user message, rendered with
                                the model's chat template; the reply to stdout
  cairn-cli [flags]             interactive chat (a session; each line a user message;
                                /help lists the commands; a line starting with // is
                                sent as text from its second slash). A turn
                                that fails because the session's replica went away is
                                sent once more as the whole conversation (not after
                                /rewind, nor for a --session this run did not start)
  cairn-cli --list-models       name, arch, family, context, chat template
  cairn-cli --health[=SERVICE]  grpc.health.v1 check of the server (or of SERVICE, e.g.
                                cairn.v1.Inference): prints the status; exit 0 when SERVING
  cairn-cli --drain-to=HOST:PORT
                                move every session of --server (of this token) to
                                HOST:PORT (a proxy over the other replicas), keeping their
                                ids: export, import with the affinity header, delete

  --server=HOST:PORT   default 127.0.0.1:50051
  --model=NAME         default: the first model the server lists
  --session=ID         continue an existing session
  --affinity-key=KEY   x-cairn-session header of every call (default: the session id;
                       the interactive chat's first session's id for all its sessions)
  --chat               one shot: send PROMPT as a user message (see above)
  --system=TEXT        a system message before the first user message (chat)
  --max-tokens=N       default 128
  --temperature=T      default 0.8 (0: greedy)
  --top-k=K --top-p=P --min-p=P --repetition-penalty=R --seed=S
  --stop=STRING        stop string (repeatable)
  --ids                print token ids instead of text (one shot)
  --stats              print prompt statistics and timings to stderr (one shot)
  --timeout=SECONDS    deadline of each request (default: none)
  --token=TOKEN        bearer token for a server started with --auth-token-file
  --tls-ca=PEM         connect with TLS, trusting this CA (or self-signed certificate;
                       default with --tls-cert: the system's CAs)
  --tls-cert=PEM --tls-key=PEM
                       connect with TLS presenting this client certificate chain and
                       key (a server started with --tls-client-ca)
  --tls-server-name=N  expected name in the server's certificate (default: the host)

Errors are printed as the status code's name and the server's message, e.g.
'cairn-cli: FAILED_PRECONDITION: cannot rewind ...'.
)";

const char kCommands[] = R"(commands:
  /fork        branch the conversation into a new session (it becomes current)
  /rewind N    cut the session back to its first N tokens
  /stats       what the last request reused and recomputed, and its timings
  /sessions    list the sessions (of this token)
  /models      list the models
  /help        this list
  /quit        leave (also /exit, or end of input)
A line starting with // is sent as text from its second slash ("//x" sends "/x").
)";

struct Options {
  std::string server = "127.0.0.1:50051";
  std::string model;
  std::string session;
  cairn::v1::SamplingParams sampling;
  cairn::v1::StopParams stop;
  bool ids = false;
  bool stats = false;
  bool list_models = false;
  bool chat = false;
  bool health = false;
  std::string health_service;
  std::string drain_to;
  std::string affinity_key;
  std::string system;
  double timeout = 0;
  std::string token;
  cairn::service::ClientTls tls;
  std::vector<std::string> prompt;
};

const Options* g_options = nullptr;
// The affinity key of the conversation (x-cairn-session); "" : none.
std::string g_affinity_key;

// Every call carries the bearer token when one is given, and the affinity
// key (`key` when given, else the conversation's).
void Prepare(grpc::ClientContext& ctx, const std::string& key = "") {
  if (g_options != nullptr && !g_options->token.empty()) {
    ctx.AddMetadata("authorization", "Bearer " + g_options->token);
  }
  const std::string& k = key.empty() ? g_affinity_key : key;
  if (!k.empty()) ctx.AddMetadata("x-cairn-session", k);
}

// 128 random bits in hex: a session id no other client will choose.
std::string NewSessionId() {
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// Whether stdout ends a line, so that output (also cut short by an error)
// always ends with a newline and never gets a spare blank line.
bool g_stdout_at_line_start = true;

void Out(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  g_stdout_at_line_start = text.back() == '\n';
}

void EndLine() {
  if (!g_stdout_at_line_start) Out("\n");
}

struct LastStats {
  cairn::v1::PromptInfo prompt;
  cairn::v1::Finished finished;
  bool valid = false;
  std::string text;  // the reply's text
};

void PrintStats(const LastStats& s) {
  if (!s.valid) {
    std::fprintf(stderr, "(no request yet)\n");
    return;
  }
  const auto& p = s.prompt;
  const auto& f = s.finished;
  std::fprintf(stderr,
               "[prompt %d tokens: reused %d, recomputed %d, source %s, restored checkpoint at %d]\n"
               "[generated %d tokens, finish %s; queue %.3fs, prefill %.3fs, ttft %.3fs, %.1f tok/s; "
               "session holds %d tokens]\n",
               p.prompt_tokens(), p.reused_tokens(), p.recomputed_tokens(), p.reuse_source().c_str(),
               p.restored_checkpoint_pos(), f.usage().completion_tokens(),
               cairn::v1::FinishReason_Name(f.reason()).c_str(), f.timings().queue_seconds(),
               f.timings().prefill_seconds(), f.timings().time_to_first_token_seconds(),
               f.timings().decode_tokens_per_second(), f.usage().session_tokens());
}

// Streams one request; prints text (or ids) as it arrives.
grpc::Status Stream(Inference::Stub& stub, const Options& o, const cairn::v1::GenerateRequest& req, LastStats* stats) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  if (o.timeout > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000)));
  }
  auto reader = stub.Generate(&ctx, req);
  cairn::v1::GenerateResponse ev;
  stats->text.clear();
  bool first_id = true;
  while (reader->Read(&ev)) {
    if (ev.has_prompt()) {
      stats->prompt = ev.prompt();
    } else if (ev.has_token()) {
      if (o.ids) {
        Out((first_id ? "" : " ") + std::to_string(ev.token().id()));
        first_id = false;
      } else {
        Out(ev.token().text());
      }
      stats->text += ev.token().text();
    } else if (ev.has_finished()) {
      stats->finished = ev.finished();
      stats->valid = true;
      stats->text += ev.finished().text();
      if (!o.ids) Out(ev.finished().text());
    }
  }
  EndLine();
  return reader->Finish();
}

int Fail(const grpc::Status& st) {
  EndLine();
  std::fprintf(stderr, "cairn-cli: %s\n", cairn::service::StatusText(st).c_str());
  return 1;
}

grpc::Status Session(Inference::Stub& stub, const cairn::v1::SessionRequest& req, cairn::v1::SessionResponse* resp) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  return stub.SessionControl(&ctx, req, resp);
}

// A failure a replica going away causes (through a proxy: UNAVAILABLE, or
// INTERNAL/UNKNOWN for a stream cut short; NOT_FOUND when the session did
// not survive it): worth one retry with the whole conversation.
bool Retriable(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::NOT_FOUND:
      return true;
    default:
      return false;
  }
}

// A system message (when `system` is not empty), then the user's.
void AddChatTurn(const std::string& system, const std::string& user, cairn::v1::GenerateRequest* req) {
  if (!system.empty()) {
    auto* sys = req->add_messages();
    sys->set_role("system");
    sys->set_content(system);
  }
  auto* m = req->add_messages();
  m->set_role("user");
  m->set_content(user);
}

// The interactive chat: a session (created here unless --session names
// one), a user message a line, and the commands of kCommands.
class Chat {
 public:
  Chat(Inference::Stub& stub, Options o)
      : stub_(stub),
        o_(std::move(o)),
        send_system_(o_.session.empty() && !o_.system.empty()),
        can_resend_(o_.session.empty()) {}

  // Until /quit or the end of the input; the exit status.
  int Run() {
    if (grpc::Status st = OpenSession(); !st.ok()) return Fail(st);
    std::fprintf(stderr, "cairn-cli: model %s, session %s. /help lists the commands\n", o_.model.c_str(),
                 o_.session.c_str());
    std::string line;
    while (true) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) {
        std::fprintf(stderr, "\n");  // end the prompt's line
        return 0;
      }
      if (line.empty()) continue;
      if (line == "/quit" || line == "/exit") return 0;
      if (line == "/help") {
        std::fprintf(stderr, "%s", kCommands);
      } else if (line == "/stats") {
        PrintStats(stats_);
      } else if (line == "/sessions" || line == "/fork" || line == "/rewind" || line.rfind("/rewind ", 0) == 0) {
        SessionCommand(line);
      } else if (line == "/models") {
        if (grpc::Status st = ListModels(); !st.ok()) return Fail(st);
      } else if (line.rfind("//", 0) == 0) {
        Turn(line.substr(1));  // an escaped slash: text for the model
      } else if (line[0] == '/') {
        // A mistyped command must not reach the model as a message.
        std::fprintf(stderr,
                     "cairn-cli: unknown command '%s' (/help lists them; start a line with // to send "
                     "it as text)\n",
                     line.substr(0, line.find(' ')).c_str());
      } else {
        Turn(line);
      }
    }
  }

 private:
  // A new session with an id chosen here, so that the create already routes
  // where the session will live; its id is the affinity key.
  grpc::Status OpenSession() {
    if (o_.session.empty()) {
      cairn::v1::SessionRequest req;
      req.mutable_create()->set_model(o_.model);
      req.mutable_create()->set_session_id(NewSessionId());
      if (g_affinity_key.empty()) g_affinity_key = req.create().session_id();
      cairn::v1::SessionResponse resp;
      if (grpc::Status st = Session(stub_, req, &resp); !st.ok()) return st;
      o_.session = resp.session().session_id();
      history_tokens_ = resp.session().tokens();
    }
    if (g_affinity_key.empty()) g_affinity_key = o_.session;
    return grpc::Status::OK;
  }

  // /sessions, /fork, /rewind N.
  void SessionCommand(const std::string& line) {
    cairn::v1::SessionRequest req;
    if (line == "/sessions") {
      req.mutable_list();
    } else if (line == "/fork") {
      req.mutable_fork()->set_session_id(o_.session);
    } else {
      int n = -1;
      if (!absl::SimpleAtoi(line.substr(7), &n)) {
        std::fprintf(stderr, "usage: /rewind N (tokens to keep)\n");
        return;
      }
      req.mutable_rewind()->set_session_id(o_.session);
      req.mutable_rewind()->set_tokens(n);
      can_resend_ = false;
    }
    cairn::v1::SessionResponse resp;
    if (grpc::Status st = Session(stub_, req, &resp); !st.ok()) {
      Fail(st);
      return;
    }
    if (resp.has_sessions()) {
      for (const auto& s : resp.sessions().sessions()) {
        std::fprintf(stderr, "%s %s %d tokens, idle %.0fs%s%s\n", s.session_id().c_str(), s.model().c_str(), s.tokens(),
                     s.idle_seconds(), s.busy() ? ", busy" : "", s.session_id() == o_.session ? "  (current)" : "");
      }
    } else if (line == "/fork") {
      history_tokens_ = resp.session().tokens();
      std::fprintf(stderr, "forked %s -> %s (now current; %d tokens)\n", o_.session.c_str(),
                   resp.session().session_id().c_str(), resp.session().tokens());
      o_.session = resp.session().session_id();
    } else {
      history_tokens_ = resp.session().tokens();
      std::fprintf(stderr, "session now holds %d tokens\n", resp.session().tokens());
    }
  }

  grpc::Status ListModels() {
    cairn::v1::ListModelsResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    if (grpc::Status st = stub_.ListModels(&ctx, {}, &resp); !st.ok()) return st;
    for (const auto& m : resp.models()) std::fprintf(stderr, "%s (%s)\n", m.name().c_str(), m.arch().c_str());
    return grpc::Status::OK;
  }

  // One user message and the reply. A turn that failed because the replica
  // went away is sent once more with the whole conversation, which any
  // replica continues (from the session directory, or re-created).
  void Turn(const std::string& text) {
    cairn::v1::GenerateRequest req;
    req.set_model(o_.model);
    req.set_session_id(o_.session);
    req.set_append(true);
    if (history_tokens_.has_value()) req.set_session_tokens(*history_tokens_);
    AddChatTurn(send_system_ ? o_.system : "", text, &req);
    *req.mutable_sampling() = o_.sampling;
    *req.mutable_stop() = o_.stop;
    grpc::Status st = Stream(stub_, o_, req, &stats_);
    if (!st.ok() && can_resend_ && Retriable(st)) {
      std::fprintf(stderr, "cairn-cli: %s; sending the whole conversation again\n",
                   cairn::service::StatusText(st).c_str());
      cairn::v1::GenerateRequest whole = req;
      whole.set_append(false);
      whole.set_create_session(true);
      whole.clear_session_tokens();  // the whole conversation: the server finds where the history differs
      whole.clear_messages();
      for (const auto& c : conversation_) *whole.add_messages() = c;
      for (const auto& c : req.messages()) *whole.add_messages() = c;
      st = Stream(stub_, o_, whole, &stats_);
    }
    if (!st.ok()) {
      Fail(st);
      return;
    }
    send_system_ = false;
    history_tokens_ = stats_.finished.usage().session_tokens();
    for (const auto& c : req.messages()) conversation_.push_back(c);
    cairn::v1::ChatMessage reply;
    reply.set_role("assistant");
    reply.set_content(stats_.text);
    conversation_.push_back(std::move(reply));
  }

  Inference::Stub& stub_;
  Options o_;
  // The system message opens a conversation this run starts, once.
  bool send_system_;
  // The conversation as messages, to send again whole when the session was
  // lost with its replica; not known for a session this run did not start,
  // nor after a rewind (tokens, not messages).
  bool can_resend_;
  std::vector<cairn::v1::ChatMessage> conversation_;
  // The length of the session's history this chat has seen (its last turn
  // that ended OK, or the create, fork or rewind), stated with every turn
  // (GenerateRequest.session_tokens): a turn the server ended OK just as
  // the client gave up on it (--timeout) is cut away, not built on. Unknown
  // for a --session until its first turn.
  std::optional<int32_t> history_tokens_;
  LastStats stats_;
};

int Health(const std::shared_ptr<grpc::Channel>& channel, const Options& o) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(o.health_service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::ClientContext ctx;
  Prepare(ctx);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>((o.timeout > 0 ? o.timeout : 5) * 1000)));
  if (grpc::Status st = stub->Check(&ctx, req, &resp); !st.ok()) return Fail(st);
  std::printf("%s\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()).c_str());
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

// A planned drain: every session of the source moves to the target (a proxy
// over the remaining replicas, so each lands where its key now routes) with
// its id, then leaves the source. The source must already be out of the
// proxy's rotation, or an import may route back to it.
int Drain(Inference::Stub& source, Inference::Stub& target) {
  cairn::v1::SessionRequest list;
  list.mutable_list();
  cairn::v1::SessionResponse sessions;
  if (grpc::Status st = Session(source, list, &sessions); !st.ok()) return Fail(st);
  int moved = 0, failed = 0;
  for (const auto& info : sessions.sessions().sessions()) {
    const std::string& id = info.session_id();
    auto step = [&](Inference::Stub& stub, const cairn::v1::SessionRequest& req, cairn::v1::SessionResponse* resp) {
      grpc::ClientContext ctx;
      Prepare(ctx, id);
      return stub.SessionControl(&ctx, req, resp);
    };
    cairn::v1::SessionRequest exp;
    exp.mutable_export_()->set_session_id(id);
    cairn::v1::SessionResponse snapshot;
    grpc::Status st = step(source, exp, &snapshot);
    cairn::v1::SessionResponse imported;
    if (st.ok()) {
      cairn::v1::SessionRequest imp;
      imp.mutable_import()->set_snapshot(snapshot.snapshot());
      imp.mutable_import()->set_session_id(id);
      st = step(target, imp, &imported);
    }
    if (st.ok()) {
      cairn::v1::SessionRequest del;
      del.mutable_delete_()->set_session_id(id);
      cairn::v1::SessionResponse deleted;
      st = step(source, del, &deleted);
    }
    if (st.ok()) {
      ++moved;
      std::fprintf(stderr, "moved %s (%d tokens)\n", id.c_str(), imported.session().tokens());
    } else {
      ++failed;
      std::fprintf(stderr, "cairn-cli: session %s not moved: %s\n", id.c_str(), cairn::service::StatusText(st).c_str());
    }
  }
  std::printf("drained %d of %d sessions\n", moved, moved + failed);
  return failed == 0 ? 0 : 1;
}

// Every flag of cairn-cli, into `o` (the sampling and stop fields through
// the numbers in `n`, set once parsed).
struct Numbers {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, seed;
  int64_t max_tokens = 128;
};

void DeclareFlags(cairn::service::FlagParser& flags, Options& o, Numbers& n) {
  flags.Switch("ids", &o.ids);
  flags.Switch("stats", &o.stats);
  flags.Switch("list-models", &o.list_models);
  flags.Switch("chat", &o.chat);
  flags.OptionalValue("health", &o.health, &o.health_service);
  flags.Add("drain-to", &o.drain_to);
  flags.Add("affinity-key", &o.affinity_key);
  flags.Add("system", &o.system);
  flags.Add("model", &o.model);
  flags.Add("session", &o.session);
  flags.Add("stop", [&o](const std::string& v) {
    o.stop.add_stop_strings(v);
    return absl::OkStatus();
  });
  flags.Add("max-tokens", &n.max_tokens);
  flags.Add("temperature", &n.temperature);
  flags.Add("top-k", &n.top_k);
  flags.Add("top-p", &n.top_p);
  flags.Add("min-p", &n.min_p);
  flags.Add("repetition-penalty", &n.repetition_penalty);
  flags.Add("seed", &n.seed);
  flags.Add("timeout", &o.timeout);
  cairn::service::AddClientFlags(flags, &o.server, &o.token, &o.tls);
  flags.Positional(&o.prompt);
}

// The numbers given (the server's defaults for the others).
void ApplyNumbers(const Numbers& n, Options& o) {
  o.stop.set_max_tokens(static_cast<int32_t>(n.max_tokens));
  if (n.temperature) o.sampling.set_temperature(static_cast<float>(*n.temperature));
  if (n.top_k) o.sampling.set_top_k(static_cast<int32_t>(*n.top_k));
  if (n.top_p) o.sampling.set_top_p(static_cast<float>(*n.top_p));
  if (n.min_p) o.sampling.set_min_p(static_cast<float>(*n.min_p));
  if (n.repetition_penalty) o.sampling.set_repetition_penalty(static_cast<float>(*n.repetition_penalty));
  if (n.seed) o.sampling.set_seed(static_cast<uint64_t>(*n.seed));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  Numbers n;
  cairn::service::FlagParser flags("cairn-cli");
  DeclareFlags(flags, o, n);
  if (auto outcome = flags.Parse(argc, argv, kUsage); outcome != cairn::service::FlagParser::Outcome::kRun) {
    return cairn::service::FlagParser::ExitCode(outcome);
  }
  ApplyNumbers(n, o);
  g_options = &o;
  auto channel = cairn::service::ClientChannel(o.server, o.tls);
  if (!channel.ok()) {
    std::fprintf(stderr, "cairn-cli: %s\n", channel.status().ToString().c_str());
    return 2;
  }
  auto stub = Inference::NewStub(*channel);
  g_affinity_key = !o.affinity_key.empty() ? o.affinity_key : o.session;
  if (o.health) return Health(*channel, o);
  if (!o.drain_to.empty()) {
    auto target = cairn::service::ClientChannel(o.drain_to, o.tls);
    if (!target.ok()) {
      std::fprintf(stderr, "cairn-cli: %s\n", target.status().ToString().c_str());
      return 2;
    }
    return Drain(*stub, *Inference::NewStub(*target));
  }
  if (o.model.empty() || o.list_models) {
    cairn::v1::ListModelsResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (grpc::Status st = stub->ListModels(&ctx, {}, &resp); !st.ok()) return Fail(st);
    if (o.list_models) {
      for (const auto& m : resp.models()) {
        std::printf("%s\t%s\t%s\tctx %d\ttemplate %s%s\n", m.name().c_str(), m.arch().c_str(), m.family().c_str(),
                    m.context_length(), m.chat_template().empty() ? "none" : m.chat_template().c_str(),
                    m.synthetic() ? "\tsynthetic (random weights)" : "");
      }
      return 0;
    }
    if (resp.models_size() == 0) {
      std::fprintf(stderr, "cairn-cli: the server serves no model\n");
      return 1;
    }
    o.model = resp.models(0).name();
  }
  if (o.prompt.empty()) return Chat(*stub, o).Run();

  std::string text;
  for (const auto& p : o.prompt) text += (text.empty() ? "" : " ") + p;
  cairn::v1::GenerateRequest req;
  req.set_model(o.model);
  req.set_session_id(o.session);
  req.set_append(!o.session.empty());
  if (o.chat) {
    AddChatTurn(o.system, text, &req);
  } else {
    req.add_parts()->set_text(text);
  }
  *req.mutable_sampling() = o.sampling;
  *req.mutable_stop() = o.stop;
  req.set_stream_text(!o.ids);
  // A completion continues the prompt, so it is printed first; a chat
  // reply stands alone.
  if (!o.ids && !o.chat) Out(text);
  LastStats stats;
  grpc::Status st = Stream(*stub, o, req, &stats);
  if (!st.ok()) return Fail(st);
  if (o.stats) PrintStats(stats);
  return 0;
}
