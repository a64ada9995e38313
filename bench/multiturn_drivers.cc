#include "bench/multiturn_drivers.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bench/bench_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace cairn::bench {
namespace {

using ::cairn::bench::Die;
using checkpoint::CheckpointEngine;
using checkpoint::Prompt;
using checkpoint::Sequence;

[[noreturn]] void Die(const std::string& what, const grpc::Status& s) {
  std::fprintf(stderr, "%s: gRPC status %d: %s\n", what.c_str(), static_cast<int>(s.error_code()),
               s.error_message().c_str());
  std::exit(1);
}

// In process, through two checkpoint engines on one backend. Replies are
// drawn from the seeded generator (reuse does not depend on their content)
// and decoded on both sides.
class EngineDriver final : public Driver {
 public:
  EngineDriver(CheckpointEngine* on, CheckpointEngine* off, std::mt19937& rng) : Driver(rng), engine_{on, off} {}

  int NewSession() override {
    std::array<std::unique_ptr<Sequence>, 2> p;
    for (int m = 0; m < 2; ++m) {
      auto s = engine_[m]->NewSequence();
      if (!s.ok()) Die("new sequence", s.status());
      p[m] = std::move(*s);
    }
    seqs_.push_back(std::move(p));
    return static_cast<int>(seqs_.size()) - 1;
  }

  Msg Turn(int s, const Conv& c, const Msgs& msgs) override {
    auto& seq = seqs_[s];
    for (int k = 0; k < 2; ++k) {
      const int m = (k + requests_) % 2;  // alternate which side goes first (warm caches)
      const Prompt p = c.Build(msgs, m);
      const int64_t minimum = Minimum(m, p);
      const auto t0 = Clock::now();
      auto r = engine_[m]->Prefill(*seq[m], p);
      const double secs = Since(t0);
      if (!r.ok()) Die("prefill", r.status());
      totals[m].prompt += p.positions();
      totals[m].recomputed += r->stats.recomputed;
      totals[m].minimum += minimum;
      totals[m].ttft += secs;
      ++totals[m].requests;
      Computed(m, p.keys());
    }
    ++requests_;
    std::vector<TokenId> out;
    for (int i = 0; i < kReply; ++i) out.push_back(3 + static_cast<TokenId>(rng_() % (c.vocab - 3)));
    for (int m = 0; m < 2; ++m) {
      for (TokenId t : out) {
        auto r = engine_[m]->Decode(*seq[m], t);
        if (!r.ok()) Die("decode", r.status());
      }
      engine_[m]->EndGeneration(*seq[m]).IgnoreError();
      Computed(m, seq[m]->history().keys());
    }
    return Same(out);
  }

 private:
  CheckpointEngine* engine_[2];
  std::vector<std::array<std::unique_ptr<Sequence>, 2>> seqs_;
};

// Through the gRPC API of two servers: [0] checkpointing on, [1] off.
class GrpcDriver final : public Driver {
 public:
  GrpcDriver(int port_on, int port_off, std::string model, float temperature, uint32_t seed, std::mt19937& rng)
      : Driver(rng), model_(std::move(model)), temperature_(temperature), seed_(seed) {
    const int ports[2] = {port_on, port_off};
    for (int m = 0; m < 2; ++m) {
      stub_[m] = v1::Inference::NewStub(
          grpc::CreateChannel("127.0.0.1:" + std::to_string(ports[m]), grpc::InsecureChannelCredentials()));
    }
  }

  int NewSession() override {
    std::array<std::string, 2> ids;
    for (int m = 0; m < 2; ++m) {
      v1::SessionRequest req;
      req.mutable_create()->set_model(model_);
      v1::SessionResponse resp;
      grpc::ClientContext ctx;
      grpc::Status st = stub_[m]->SessionControl(&ctx, req, &resp);
      if (!st.ok()) Die("SessionControl create", st);
      ids[m] = resp.session().session_id();
    }
    sessions_.push_back(ids);
    return static_cast<int>(sessions_.size()) - 1;
  }

  Msg Turn(int s, const Conv& c, const Msgs& msgs) override {
    Msg reply;
    for (int k = 0; k < 2; ++k) {
      const int m = (k + requests_) % 2;  // alternate which server goes first (same load)
      Prompt p = c.Build(msgs, m);
      const int64_t minimum = Minimum(m, p);
      v1::GenerateRequest req;
      req.set_model(model_);
      if (s != kSessionless) req.set_session_id(sessions_[s][m]);
      auto add = [&req, &c](const std::vector<TokenId>& tokens) {
        v1::TokenIds* ids = req.add_parts()->mutable_tokens();
        for (TokenId t : tokens) ids->add_ids(t);
        if (c.marked) req.add_parts()->set_message_boundary(true);
      };
      add(c.system);
      for (const Msg& msg : msgs) add(msg.t[m]);
      req.mutable_sampling()->set_temperature(temperature_);
      // The same sampler seed for a request on both servers.
      req.mutable_sampling()->set_seed(uint64_t{seed_} * 1000003 + static_cast<uint64_t>(requests_));
      req.mutable_stop()->set_max_tokens(kReply);
      req.mutable_stop()->set_ignore_eos(true);
      req.set_stream_text(false);

      grpc::ClientContext ctx;
      const auto t0 = Clock::now();
      double first = -1;
      auto reader = stub_[m]->Generate(&ctx, req);
      v1::GenerateResponse ev;
      v1::PromptInfo info;
      v1::Finished fin;
      bool has_info = false, has_fin = false;
      std::vector<TokenId> ids;
      const int want = cancel_after > 0 ? cancel_after : kReply;
      // A whole reply is read to its end (Finished, then the status: the
      // status never arrives while a message is left unread); a cancelling
      // client stops at `want` tokens.
      while ((cancel_after == 0 || static_cast<int>(ids.size()) < want) && reader->Read(&ev)) {
        if (ev.has_prompt()) {
          info = ev.prompt();
          has_info = true;
        } else if (ev.has_token()) {
          if (first < 0) first = Since(t0);
          ids.push_back(ev.token().id());
        } else if (ev.has_finished()) {
          fin = ev.finished();
          has_fin = true;
        }
      }
      if (cancel_after > 0) {
        ctx.TryCancel();
        while (reader->Read(&ev)) {
        }
        has_fin = true;  // cancelled (or, when it was faster than the cancel, finished)
      }
      grpc::Status st = reader->Finish();
      if (!st.ok() && !(cancel_after > 0 && st.error_code() == grpc::StatusCode::CANCELLED)) {
        Die("Generate on model " + model_, st);
      }
      if (!has_info || !has_fin || static_cast<int>(ids.size()) != want || info.prompt_positions() != p.positions()) {
        std::fprintf(stderr,
                     "Generate on model %s: unexpected stream (prompt info %d, finished %d, %zu tokens, "
                     "prompt positions %d vs %d sent)\n",
                     model_.c_str(), has_info, has_fin, ids.size(), info.prompt_positions(), p.positions());
        std::exit(1);
      }
      totals[m].prompt += info.prompt_positions();
      totals[m].recomputed += info.recomputed_tokens();
      totals[m].minimum += minimum;
      totals[m].ttft += cancel_after > 0 ? first : fin.timings().time_to_first_token_seconds();
      totals[m].client_ttft += first;
      ++totals[m].replies;
      if (static_cast<int>(ids.size()) == kReply && std::equal(ids.begin() + kReply / 3, ids.end(), ids.begin())) {
        ++totals[m].periodic_replies;
      }
      ++totals[m].requests;
      // Computed: the prompt, then every generated token but the last (it
      // was sampled, streamed and put in the session's history, but never
      // run through the model).
      p.AddTokens(std::span<const TokenId>(ids.data(), ids.size() - 1));
      Computed(m, p.keys());
      reply.t[m] = std::move(ids);
    }
    // The generator advances as the in-process replies' draws do, so that
    // every later user message is the same as in process.
    for (int i = 0; i < kReply; ++i) rng_();
    ++requests_;
    return reply;
  }

 private:
  std::string model_;
  float temperature_;
  uint32_t seed_;
  std::unique_ptr<v1::Inference::Stub> stub_[2];
  std::vector<std::array<std::string, 2>> sessions_;
};

}  // namespace

std::unique_ptr<Driver> NewEngineDriver(CheckpointEngine* on, CheckpointEngine* off, std::mt19937& rng) {
  return std::make_unique<EngineDriver>(on, off, rng);
}

std::unique_ptr<Driver> NewGrpcDriver(int port_on, int port_off, std::string model, float temperature, uint32_t seed,
                                      std::mt19937& rng) {
  return std::make_unique<GrpcDriver>(port_on, port_off, std::move(model), temperature, seed, rng);
}

}  // namespace cairn::bench
