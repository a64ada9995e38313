// bench/multiturn's agent scenario: a tool-using conversation sent as chat
// messages (issue 26), rendered by a real chat template on the server.
#ifndef CAIRN_BENCH_MULTITURN_AGENT_H_
#define CAIRN_BENCH_MULTITURN_AGENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "checkpoint/options.h"
#include "service/host/models.h"
#include "service/server.h"

namespace cairn::bench {

// A cairn server in this process on 127.0.0.1 (a free port) serving `spec`
// (a built-in demo model or a file) with `threads` threads and checkpoints
// as `options`; `chat_templates` as --chat-template gives them. Dies when it
// cannot start.
std::unique_ptr<service::Server> StartServer(const service::ModelSpec& spec,
                                             const checkpoint::CheckpointOptions& options, int threads,
                                             std::map<std::string, std::string> chat_templates = {});

struct AgentTotals {
  int64_t prompt = 0, recomputed = 0, minimum = 0;
  int requests = 0;
};

// Serves `spec` (checkpoints as `options`) with the Jinja template in
// `template_file` as its chat template, on 127.0.0.1 in this process, and
// runs `users` user turns of an agent loop on one session: each user turn
// is three requests (the model calls a tool with reasoning, reads its
// result, calls another, answers), every request the whole conversation as
// messages with tools, 48 generated tokens each (the client writes the
// assistant turns it continues with: reasoning, tool calls, answers). The
// minimum is the part of each prompt (RenderPrompt's tokens) that no earlier
// request computed (prompts and replies). It ends early where the next
// request would not fit the model's context; no requests for a model
// without a tokenizer. Dies on any error.
AgentTotals MeasureAgent(const service::ModelSpec& spec, const std::string& template_file,
                         const checkpoint::CheckpointOptions& options, int threads, int users, uint32_t seed);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_MULTITURN_AGENT_H_
