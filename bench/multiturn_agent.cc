#include "bench/multiturn_agent.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cairn/v1/inference.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "service/host/log.h"
#include "service/programs/demo_catalog.h"

namespace cairn::bench {
namespace {

constexpr int kReplyTokens = 48;

constexpr const char* kTools =
    R"([{"type": "function", "function": {"name": "search_files", "description": "Search the repository.", )"
    R"("parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}, )"
    R"({"type": "function", "function": {"name": "read_file", "description": "Read a file.", )"
    R"("parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}])";

constexpr const char* kWords[] = {"the",  "cache",  "is",    "a",      "store", "of",    "states", "and",
                                  "when", "it",     "fills", "we",     "drop",  "old",   "ones",   "so",
                                  "that", "new",    "turns", "fit",    "one",   "day",   "little", "dog",
                                  "ran",  "to",     "see",   "big",    "tree",  "in",    "park",   "with",
                                  "his",  "friend", "they",  "played", "all",   "happy", "then",   "home"};

[[noreturn]] void Die(const std::string& what, const grpc::Status& st) {
  std::fprintf(stderr, "multiturn agent: %s: %s\n", what.c_str(), st.error_message().c_str());
  std::exit(1);
}

class AgentRun {
 public:
  AgentRun(int port, std::string model, uint32_t seed)
      : stub_(v1::Inference::NewStub(
            grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))),
        model_(std::move(model)),
        rng_(seed) {}

  std::string Words(int lo, int hi) {
    const int n = lo + static_cast<int>(rng_() % static_cast<uint32_t>(hi - lo + 1));
    std::string s;
    for (int i = 0; i < n; ++i) {
      s += (i ? " " : "") + std::string(kWords[rng_() % std::size(kWords)]);
    }
    return s;
  }

  void Start() {
    v1::SessionRequest req;
    req.mutable_create()->set_model(model_);
    v1::SessionResponse resp;
    grpc::ClientContext ctx;
    if (grpc::Status st = stub_->SessionControl(&ctx, req, &resp); !st.ok()) Die("create session", st);
    session_ = resp.session().session_id();
    Add("system", "You are a coding agent. " + Words(20, 30));
  }

  v1::ChatMessage* Add(const std::string& role, const std::string& content) {
    v1::ChatMessage* m = &messages_.emplace_back();
    m->set_role(role);
    m->set_content(content);
    return m;
  }

  // An assistant turn that calls `tool` after reasoning.
  void Call(const std::string& tool, const std::string& argument) {
    const std::string id = "call_" + std::to_string(++calls_);
    v1::ChatMessage* m = &messages_.emplace_back();
    m->set_role("assistant");
    m->set_reasoning_content(Words(8, 16));
    v1::ToolCall* call = m->add_tool_calls();
    call->set_id(id);
    call->set_name(tool);
    call->set_arguments(R"({")" + argument + R"(": ")" + Words(1, 3) + R"("})");
    v1::ChatMessage* result = Add("tool", Words(15, 30));
    result->set_tool_call_id(id);
    result->set_name(tool);
  }

  // One request: the whole conversation, a reply of kReplyTokens; false
  // (nothing sent) when it would not fit the context.
  bool Request(int32_t context) {
    v1::RenderPromptRequest render;
    render.set_model(model_);
    render.set_tools(kTools);
    for (const auto& m : messages_) *render.add_messages() = m;
    v1::RenderPromptResponse rendered;
    {
      grpc::ClientContext ctx;
      if (grpc::Status st = stub_->RenderPrompt(&ctx, render, &rendered); !st.ok()) Die("RenderPrompt", st);
    }
    std::vector<TokenId> prompt(rendered.token_ids().begin(), rendered.token_ids().end());
    if (static_cast<int32_t>(prompt.size()) + kReplyTokens >= context) return false;
    size_t best = 0;
    for (const auto& path : computed_) {
      const size_t n = std::min(path.size(), prompt.size());
      size_t k = 0;
      while (k < n && path[k] == prompt[k]) ++k;
      best = std::max(best, k);
    }
    v1::GenerateRequest req;
    req.set_model(model_);
    req.set_session_id(session_);
    req.set_tools(kTools);
    for (const auto& m : messages_) *req.add_messages() = m;
    req.mutable_sampling()->set_temperature(0);
    req.mutable_stop()->set_max_tokens(kReplyTokens);
    req.mutable_stop()->set_ignore_eos(true);
    req.set_stream_text(false);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    v1::GenerateResponse ev;
    std::vector<TokenId> path = prompt;
    v1::PromptInfo info;
    while (reader->Read(&ev)) {
      if (ev.has_prompt()) info = ev.prompt();
      if (ev.has_token()) path.push_back(ev.token().id());
    }
    if (grpc::Status st = reader->Finish(); !st.ok()) Die("Generate", st);
    if (info.prompt_tokens() != static_cast<int32_t>(prompt.size())) {
      std::fprintf(stderr, "multiturn agent: Generate processed %d tokens, RenderPrompt gave %zu\n",
                   info.prompt_tokens(), prompt.size());
      std::exit(1);
    }
    path.pop_back();  // the last sampled token is never run through the model
    computed_.push_back(std::move(path));
    totals.prompt += static_cast<int64_t>(prompt.size());
    totals.recomputed += info.recomputed_tokens();
    totals.minimum += static_cast<int64_t>(prompt.size() - best);
    ++totals.requests;
    return true;
  }

  AgentTotals totals;

 private:
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::string model_;
  std::mt19937 rng_;
  std::string session_;
  std::deque<v1::ChatMessage> messages_;  // a deque: pointers stay valid
  std::vector<std::vector<TokenId>> computed_;
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<service::Server> StartServer(const service::ModelSpec& spec,
                                             const checkpoint::CheckpointOptions& options, int threads,
                                             std::map<std::string, std::string> chat_templates) {
  service::ServerOptions opt;
  opt.listen = "127.0.0.1:0";
  opt.models_options.builtin = service::DemoModelCatalog();
  opt.models = {spec};
  opt.models_options.threads = threads;
  opt.models_options.checkpoint = options;
  opt.models_options.chat_template_files = std::move(chat_templates);
  service::SetLogLevel(service::LogLevel::kWarning);  // no access-log line per request
  auto server = service::Server::Create(opt);
  if (!server.ok()) {
    std::fprintf(stderr, "starting a server for %s: %s\n", spec.name.c_str(), server.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*server);
}

AgentTotals MeasureAgent(const service::ModelSpec& spec, const std::string& template_file,
                         const checkpoint::CheckpointOptions& options, int threads, int users, uint32_t seed) {
  std::unique_ptr<service::Server> server = StartServer(spec, options, threads, {{spec.name, template_file}});
  auto served = server->models().Find(spec.name);
  if (!served.ok() || (*served)->tokenizer == nullptr) return AgentTotals{};  // messages need a tokenizer
  const int32_t context = (*served)->context_length();
  AgentRun run(server->port(), spec.name, seed);
  run.Start();
  for (int u = 0; u < users; ++u) {
    run.Add("user", run.Words(8, 20));
    if (!run.Request(context)) break;  // reasons, calls search_files
    run.Call("search_files", "pattern");
    if (!run.Request(context)) break;  // reads the result, calls read_file
    run.Call("read_file", "path");
    if (!run.Request(context)) break;  // answers
    v1::ChatMessage* answer = run.Add("assistant", run.Words(10, 20));
    answer->set_reasoning_content(run.Words(8, 16));
  }
  return run.totals;
}

}  // namespace cairn::bench
