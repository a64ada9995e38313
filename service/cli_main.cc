// cairn-cli: chat with a cairn server, or run one prompt for scripts.
//
//   cairn-cli [--server=HOST:PORT] [--model=NAME] "Once upon a time"   one shot
//   cairn-cli [--model=NAME] --chat [--system=TEXT] "Hello"            one chat turn
//   cairn-cli [--server=HOST:PORT] [--model=NAME]                      interactive chat
//
// Interactive commands: /fork, /rewind N, /stats, /sessions, /models, /quit.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace {

using cairn::v1::Inference;

const char kUsage[] = R"(cairn-cli: talk to a cairn server

  cairn-cli [flags] PROMPT...   one shot: stream the completion of PROMPT to stdout
  cairn-cli --chat [flags] PROMPT...
                                one chat turn: PROMPT as a user message, rendered with
                                the model's chat template; the reply to stdout
  cairn-cli [flags]             interactive chat (a session; each line a user message;
                                /fork /rewind N /stats /sessions /models /quit)
  cairn-cli --list-models       name, arch, family, context, chat template

  --server=HOST:PORT   default 127.0.0.1:50051
  --model=NAME         default: the first model the server lists
  --session=ID         continue an existing session
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
  --tls-ca=PEM         connect with TLS, trusting this CA (or self-signed certificate)
  --tls-server-name=N  expected name in the server's certificate (default: the host)
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
  std::string system;
  double timeout = 0;
  std::string token;
  std::string tls_ca;
  std::string tls_server_name;
  std::vector<std::string> prompt;
};

const Options* g_options = nullptr;

// Every call carries the bearer token when one is given.
void Prepare(grpc::ClientContext& ctx) {
  if (g_options != nullptr && !g_options->token.empty()) {
    ctx.AddMetadata("authorization", "Bearer " + g_options->token);
  }
}

struct LastStats {
  cairn::v1::PromptInfo prompt;
  cairn::v1::Finished finished;
  bool valid = false;
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
grpc::Status Run(Inference::Stub& stub, const Options& o, const cairn::v1::GenerateRequest& req,
                 LastStats* stats) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  if (o.timeout > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000)));
  }
  auto reader = stub.Generate(&ctx, req);
  cairn::v1::GenerateResponse ev;
  while (reader->Read(&ev)) {
    if (ev.has_prompt()) {
      stats->prompt = ev.prompt();
    } else if (ev.has_token()) {
      if (o.ids) {
        std::printf("%d ", ev.token().id());
      } else {
        std::fwrite(ev.token().text().data(), 1, ev.token().text().size(), stdout);
      }
      std::fflush(stdout);
    } else if (ev.has_finished()) {
      stats->finished = ev.finished();
      stats->valid = true;
      if (!o.ids) std::fwrite(ev.finished().text().data(), 1, ev.finished().text().size(), stdout);
    }
  }
  std::printf("\n");
  return reader->Finish();
}

int Fail(const grpc::Status& st) {
  std::fprintf(stderr, "cairn-cli: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  return 1;
}

grpc::Status Session(Inference::Stub& stub, const cairn::v1::SessionRequest& req,
                     cairn::v1::SessionResponse* resp) {
  grpc::ClientContext ctx;
  Prepare(ctx);
  return stub.SessionControl(&ctx, req, resp);
}

int Interactive(Inference::Stub& stub, Options o) {
  // The system message opens a conversation this run starts, once.
  bool send_system = o.session.empty() && !o.system.empty();
  if (o.session.empty()) {
    cairn::v1::SessionRequest req;
    req.mutable_create()->set_model(o.model);
    cairn::v1::SessionResponse resp;
    if (grpc::Status st = Session(stub, req, &resp); !st.ok()) return Fail(st);
    o.session = resp.session().session_id();
  }
  std::fprintf(stderr, "cairn-cli: model %s, session %s. /fork /rewind N /stats /sessions /quit\n",
               o.model.c_str(), o.session.c_str());
  LastStats stats;
  std::string line;
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/stats") {
      PrintStats(stats);
      continue;
    }
    if (line == "/sessions" || line == "/fork" || line.rfind("/rewind", 0) == 0) {
      cairn::v1::SessionRequest req;
      if (line == "/sessions") {
        req.mutable_list();
      } else if (line == "/fork") {
        req.mutable_fork()->set_session_id(o.session);
      } else {
        int n = -1;
        if (!absl::SimpleAtoi(line.substr(7), &n)) {
          std::fprintf(stderr, "usage: /rewind N (tokens to keep)\n");
          continue;
        }
        req.mutable_rewind()->set_session_id(o.session);
        req.mutable_rewind()->set_tokens(n);
      }
      cairn::v1::SessionResponse resp;
      if (grpc::Status st = Session(stub, req, &resp); !st.ok()) {
        Fail(st);
        continue;
      }
      if (resp.has_sessions()) {
        for (const auto& s : resp.sessions().sessions()) {
          std::fprintf(stderr, "%s %s %d tokens, idle %.0fs%s%s\n", s.session_id().c_str(),
                       s.model().c_str(), s.tokens(), s.idle_seconds(), s.busy() ? ", busy" : "",
                       s.session_id() == o.session ? "  (current)" : "");
        }
      } else if (line == "/fork") {
        std::fprintf(stderr, "forked %s -> %s (now current; %d tokens)\n", o.session.c_str(),
                     resp.session().session_id().c_str(), resp.session().tokens());
        o.session = resp.session().session_id();
      } else {
        std::fprintf(stderr, "session now holds %d tokens\n", resp.session().tokens());
      }
      continue;
    }
    if (line == "/models") {
      cairn::v1::ListModelsResponse resp;
      grpc::ClientContext ctx;
      Prepare(ctx);
      if (grpc::Status st = stub.ListModels(&ctx, {}, &resp); !st.ok()) return Fail(st);
      for (const auto& m : resp.models()) std::fprintf(stderr, "%s (%s)\n", m.name().c_str(), m.arch().c_str());
      continue;
    }
    cairn::v1::GenerateRequest req;
    req.set_model(o.model);
    req.set_session_id(o.session);
    req.set_append(true);
    if (send_system) {
      auto* sys = req.add_messages();
      sys->set_role("system");
      sys->set_content(o.system);
    }
    auto* m = req.add_messages();
    m->set_role("user");
    m->set_content(line);
    *req.mutable_sampling() = o.sampling;
    *req.mutable_stop() = o.stop;
    if (grpc::Status st = Run(stub, o, req, &stats); !st.ok()) {
      Fail(st);
    } else {
      send_system = false;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.stop.set_max_tokens(128);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& name, std::string* out) {
      const std::string p = "--" + name + "=";
      if (a.rfind(p, 0) == 0) {
        *out = a.substr(p.size());
        return true;
      }
      if (a == "--" + name && i + 1 < argc) {
        *out = argv[++i];
        return true;
      }
      return false;
    };
    std::string v;
    double d = 0;
    int64_t n = 0;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--ids") {
      o.ids = true;
    } else if (a == "--stats") {
      o.stats = true;
    } else if (a == "--list-models") {
      o.list_models = true;
    } else if (a == "--chat") {
      o.chat = true;
    } else if (value("system", &v)) {
      o.system = v;
    } else if (value("server", &v)) {
      o.server = v;
    } else if (value("model", &v)) {
      o.model = v;
    } else if (value("session", &v)) {
      o.session = v;
    } else if (value("stop", &v)) {
      o.stop.add_stop_strings(v);
    } else if (value("max-tokens", &v) && absl::SimpleAtoi(v, &n)) {
      o.stop.set_max_tokens(static_cast<int32_t>(n));
    } else if (value("temperature", &v) && absl::SimpleAtod(v, &d)) {
      o.sampling.set_temperature(static_cast<float>(d));
    } else if (value("top-k", &v) && absl::SimpleAtoi(v, &n)) {
      o.sampling.set_top_k(static_cast<int32_t>(n));
    } else if (value("top-p", &v) && absl::SimpleAtod(v, &d)) {
      o.sampling.set_top_p(static_cast<float>(d));
    } else if (value("min-p", &v) && absl::SimpleAtod(v, &d)) {
      o.sampling.set_min_p(static_cast<float>(d));
    } else if (value("repetition-penalty", &v) && absl::SimpleAtod(v, &d)) {
      o.sampling.set_repetition_penalty(static_cast<float>(d));
    } else if (value("seed", &v) && absl::SimpleAtoi(v, &n)) {
      o.sampling.set_seed(static_cast<uint64_t>(n));
    } else if (value("token", &v)) {
      o.token = v;
    } else if (value("tls-ca", &v)) {
      o.tls_ca = v;
    } else if (value("tls-server-name", &v)) {
      o.tls_server_name = v;
    } else if (value("timeout", &v) && absl::SimpleAtod(v, &d)) {
      o.timeout = d;
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "cairn-cli: bad argument '%s' (see --help)\n", a.c_str());
      return 2;
    } else {
      o.prompt.push_back(a);
    }
  }
  g_options = &o;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!o.tls_ca.empty()) {
    std::ifstream in(o.tls_ca);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in) {
      std::fprintf(stderr, "cairn-cli: cannot read %s\n", o.tls_ca.c_str());
      return 2;
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem.str();
    creds = grpc::SslCredentials(ssl);
    if (!o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
  }
  auto channel = grpc::CreateCustomChannel(o.server, creds, args);
  auto stub = Inference::NewStub(channel);
  if (o.model.empty() || o.list_models) {
    cairn::v1::ListModelsResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (grpc::Status st = stub->ListModels(&ctx, {}, &resp); !st.ok()) return Fail(st);
    if (o.list_models) {
      for (const auto& m : resp.models()) {
        std::printf("%s\t%s\t%s\tctx %d\ttemplate %s%s\n", m.name().c_str(), m.arch().c_str(),
                    m.family().c_str(), m.context_length(),
                    m.chat_template().empty() ? "none" : m.chat_template().c_str(),
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
  if (o.prompt.empty()) return Interactive(*stub, o);

  std::string text;
  for (const auto& p : o.prompt) text += (text.empty() ? "" : " ") + p;
  cairn::v1::GenerateRequest req;
  req.set_model(o.model);
  req.set_session_id(o.session);
  req.set_append(!o.session.empty());
  if (o.chat) {
    if (!o.system.empty()) {
      auto* sys = req.add_messages();
      sys->set_role("system");
      sys->set_content(o.system);
    }
    auto* m = req.add_messages();
    m->set_role("user");
    m->set_content(text);
  } else {
    req.add_parts()->set_text(text);
  }
  *req.mutable_sampling() = o.sampling;
  *req.mutable_stop() = o.stop;
  req.set_stream_text(!o.ids);
  // A completion continues the prompt, so it is printed first; a chat
  // reply stands alone.
  if (!o.ids && !o.chat) std::printf("%s", text.c_str());
  LastStats stats;
  grpc::Status st = Run(*stub, o, req, &stats);
  if (!st.ok()) return Fail(st);
  if (o.stats) PrintStats(stats);
  return 0;
}
