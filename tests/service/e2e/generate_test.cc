// End-to-end tests (service_fixture.h): Generate: what the stream carries (prompt statistics,
// tokens, text, the final message), sampling, stop conditions, request validation, concurrent
// requests batched, the shared prefix cache between sessionless requests.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/model/detokenizer.h"
#include "backends/model/tokenizer.h"
#include "gtest/gtest.h"
#include "service/programs/demo_models.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

TEST_F(ServiceTest, ListModelsDescribesBuiltInModels) {
  v1::ListModelsResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(client_->stub().ListModels(&ctx, {}, &resp).ok());
  ASSERT_EQ(resp.models_size(), 5);
  std::map<std::string, v1::ModelDescription> by;
  for (const auto& m : resp.models()) by[m.name()] = m;
  EXPECT_EQ(by[kTf].arch(), "llama");
  EXPECT_EQ(by[kTf].family(), "transformer");
  EXPECT_EQ(by[kRec].arch(), "mamba2");
  EXPECT_EQ(by[kRec].family(), "recurrent");
  EXPECT_EQ(by[kHyb].arch(), "granitehybrid");
  EXPECT_EQ(by[kHyb].family(), "hybrid");
  EXPECT_EQ(by[kChat].arch(), "llama");
  EXPECT_EQ(by[kChat].family(), "transformer");
  EXPECT_EQ(by["demo-moe"].arch(), "qwen35moe");
  EXPECT_EQ(by["demo-moe"].family(), "hybrid");
  for (const auto& [n, m] : by) {
    EXPECT_TRUE(m.synthetic());
    EXPECT_TRUE(m.has_tokenizer());
    EXPECT_EQ(m.chat_template(), n == kChat ? "gguf:tokenizer.chat_template" : "plain") << n;
    EXPECT_GT(m.n_vocab(), 300);
    EXPECT_GT(m.context_length(), 0);
  }
}

TEST_F(ServiceTest, StreamsPromptInfoTokensAndFinished) {
  for (const char* model : {kTf, kRec, kHyb}) {
    Result r = client_->Generate(Req(model, Ids(12), 9));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_TRUE(r.prompt_first);
    EXPECT_EQ(r.prompt.prompt_tokens(), 12);
    EXPECT_EQ(r.prompt.reused_tokens() + r.prompt.recomputed_tokens(), 12);
    ASSERT_EQ(r.ids.size(), 9u);
    ASSERT_TRUE(r.has_finished);
    EXPECT_EQ(r.messages, 1 + 9 + 1);
    EXPECT_EQ(r.finished.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(r.finished.usage().completion_tokens(), 9);
    EXPECT_EQ(r.finished.usage().prompt_tokens(), 12);
    EXPECT_GT(r.finished.timings().time_to_first_token_seconds(), 0);
  }
}

TEST_F(ServiceTest, TextIsTheDetokenizationOfTheIds) {
  auto demo = BuildDemoModel(kTf);
  ASSERT_TRUE(demo.ok());
  auto tok = Tokenizer::Create(*demo->file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  GenerateRequest req = Req(kTf, {}, 40, 1.0f);
  req.clear_parts();
  req.add_parts()->set_text("Once upon a time the little dog");
  Result r = client_->Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // BOS + the words.
  EXPECT_EQ(r.prompt.prompt_tokens(),
            static_cast<int>(1 + (*tok)->Tokenize("Once upon a time the little dog", {false, false}).size()));
  DetokenizeOptions opt;
  opt.strip_space_prefix = false;
  auto text = Detokenize(**tok, r.ids, opt);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(r.text, *text);
  EXPECT_FALSE(r.text.empty());
}

TEST_F(ServiceTest, SameSeedSameTokensAndGreedyIsDeterministic) {
  GenerateRequest a = Req(kRec, Ids(8), 16, 1.0f);
  Result r1 = client_->Generate(a);
  Result r2 = client_->Generate(a);
  ASSERT_TRUE(r1.status.ok() && r2.status.ok());
  EXPECT_EQ(r1.ids, r2.ids);
  a.mutable_sampling()->set_seed(8);
  Result r3 = client_->Generate(a);
  ASSERT_TRUE(r3.status.ok());
  EXPECT_NE(r1.ids, r3.ids);  // 16 draws over ~600 tokens at T=1
}

TEST_F(ServiceTest, SamplingFiltersAreHonored) {
  // top_k = 1 is greedy whatever the temperature.
  Result greedy = client_->Generate(Req(kTf, Ids(10), 12, 0.0f));
  GenerateRequest k1 = Req(kTf, Ids(10), 12, 1.5f);
  k1.mutable_sampling()->set_top_k(1);
  Result rk = client_->Generate(k1);
  ASSERT_TRUE(greedy.status.ok() && rk.status.ok());
  EXPECT_EQ(greedy.ids, rk.ids);
  // A tiny top_p keeps only the most likely token: greedy again.
  GenerateRequest p = Req(kTf, Ids(10), 12, 1.5f);
  p.mutable_sampling()->set_top_p(1e-6f);
  EXPECT_EQ(client_->Generate(p).ids, greedy.ids);
  // min_p = 1 keeps only tokens as likely as the best one.
  GenerateRequest m = Req(kTf, Ids(10), 12, 1.5f);
  m.mutable_sampling()->set_min_p(1.0f);
  EXPECT_EQ(client_->Generate(m).ids, greedy.ids);
  // A strong presence penalty forbids repeating any token of the window.
  GenerateRequest pen = Req(kTf, Ids(10), 24, 0.0f);
  pen.mutable_sampling()->set_presence_penalty(2.0f);
  pen.mutable_sampling()->set_repetition_penalty(10.0f);
  pen.mutable_sampling()->set_penalty_last_n(-1);
  Result rp = client_->Generate(pen);
  ASSERT_TRUE(rp.status.ok());
  const std::vector<int32_t> prompt = Ids(10);
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  int repeats = 0;
  for (int32_t id : rp.ids) repeats += !seen.insert(id).second;
  std::set<int32_t> seen_g(prompt.begin(), prompt.end());
  int repeats_g = 0;
  for (int32_t id : client_->Generate(Req(kTf, Ids(10), 24, 0.0f)).ids) repeats_g += !seen_g.insert(id).second;
  EXPECT_LE(repeats, repeats_g);
  if (repeats_g > 0) {
    EXPECT_NE(rp.ids, client_->Generate(Req(kTf, Ids(10), 24, 0.0f)).ids);
  }
}

TEST_F(ServiceTest, LogprobsAreSortedAndMatchGreedyChoice) {
  GenerateRequest req = Req(kTf, Ids(6), 5, 0.0f);
  req.set_logprobs(true);
  req.set_top_logprobs(5);
  grpc::ClientContext ctx;
  auto reader = client_->stub().Generate(&ctx, req);
  v1::GenerateResponse ev;
  int tokens = 0;
  while (reader->Read(&ev)) {
    if (!ev.has_token()) continue;
    ++tokens;
    const auto& t = ev.token();
    ASSERT_TRUE(t.has_logprob());
    ASSERT_EQ(t.top_logprobs_size(), 5);
    EXPECT_EQ(t.top_logprobs(0).id(), t.id());
    EXPECT_FLOAT_EQ(t.top_logprobs(0).logprob(), t.logprob());
    EXPECT_LE(t.logprob(), 0.0f);
    for (int i = 1; i < 5; ++i) EXPECT_LE(t.top_logprobs(i).logprob(), t.top_logprobs(i - 1).logprob());
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 5);
}

TEST_F(ServiceTest, StopStringAcrossTokenBoundariesIsNotStreamed) {
  GenerateRequest req = Req(kTf, {}, 60, 1.0f);
  req.clear_parts();
  req.add_parts()->set_text("Once upon a time");
  Result full = client_->Generate(req);
  ASSERT_TRUE(full.status.ok());
  ASSERT_GT(full.text.size(), 20u);
  // A stop string that starts inside one token's text and ends in a later one.
  const size_t start = full.text.size() / 3;
  const std::string stop = full.text.substr(start, 6);
  const size_t first = full.text.find(stop);
  req.mutable_stop()->add_stop_strings(stop);
  Result r = client_->Generate(req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.finished.reason(), v1::FINISH_REASON_STOP_STRING);
  EXPECT_EQ(r.finished.matched_stop(), stop);
  EXPECT_EQ(r.text, full.text.substr(0, first));
  EXPECT_LT(r.ids.size(), full.ids.size());
}

TEST_F(ServiceTest, StopTokenIdEndsGeneration) {
  Result full = client_->Generate(Req(kRec, Ids(7), 20));
  ASSERT_TRUE(full.status.ok());
  const int32_t stop = full.ids[5];
  size_t first = 0;
  while (full.ids[first] != stop) ++first;
  GenerateRequest req = Req(kRec, Ids(7), 20);
  req.mutable_stop()->add_stop_token_ids(stop);
  Result r = client_->Generate(req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.finished.reason(), v1::FINISH_REASON_STOP_TOKEN);
  EXPECT_EQ(r.ids, std::vector<int32_t>(full.ids.begin(), full.ids.begin() + first + 1));
}

TEST_F(ServiceTest, EndOfGenerationTokenStops) {
  // Without ignore_eos a greedy run stops at </s> if the model picks it;
  // forcing the choice: a stop on </s> (id 2) is reported as end of
  // generation when it is the model's own eos.
  GenerateRequest req = Req(kTf, Ids(5), 5);
  req.mutable_stop()->set_ignore_eos(false);
  req.mutable_stop()->set_max_tokens(0);
  Result r = client_->Generate(req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.prompt.prompt_tokens(), 5);
}

TEST_F(ServiceTest, InvalidRequestsGetPreciseCodes) {
  auto code = [&](const GenerateRequest& r) { return client_->Generate(r).status.error_code(); };
  GenerateRequest ok = Req(kTf, Ids(4), 2);
  EXPECT_EQ(code(ok), grpc::StatusCode::OK);

  GenerateRequest r = ok;
  r.set_model("nope");
  EXPECT_EQ(code(r), grpc::StatusCode::NOT_FOUND);
  r = ok;
  r.clear_parts();
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);  // empty prompt
  r = ok;
  r.mutable_parts(0)->mutable_tokens()->add_ids(1 << 20);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);  // id out of range
  r = ok;
  r.mutable_parts(0)->mutable_tokens()->add_ids(-1);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_sampling()->set_temperature(-1);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_sampling()->set_top_p(0);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_sampling()->set_min_p(2);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_sampling()->set_top_k(-3);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_sampling()->set_repetition_penalty(0);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.set_top_logprobs(21);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_stop()->set_max_tokens(-1);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_stop()->add_stop_strings("");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.mutable_stop()->add_stop_token_ids(99999);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  r.add_messages()->set_role("user");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);  // parts and messages
  r = ok;
  r.set_append(true);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);  // append without a session
  r = ok;
  r.add_parts();  // a part with nothing set
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = ok;
  auto* emb = r.add_parts()->mutable_embeddings();
  emb->set_width(64);
  emb->set_nx(1);
  emb->set_ny(1);
  for (int i = 0; i < 64; ++i) emb->add_values(0.1f);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);  // model takes no embeddings
  r = ok;
  r.set_session_id("0123456789abcdef0123456789abcdef");
  EXPECT_EQ(code(r), grpc::StatusCode::NOT_FOUND);
  // Beyond the context: RESOURCE_EXHAUSTED.
  EXPECT_EQ(code(Req(kTf, Ids(5000), 1)), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A session of another model.
  const std::string sid = client_->Create(kRec);
  r = ok;
  r.set_session_id(sid);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  // Session ops.
  v1::SessionRequest empty;
  v1::SessionResponse resp;
  EXPECT_EQ(client_->Session(empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::SessionRequest create;
  create.mutable_create()->set_model("nope");
  EXPECT_EQ(client_->Session(create, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::SessionRequest fork;
  fork.mutable_fork()->set_session_id("ffff");
  EXPECT_EQ(client_->Session(fork, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_->Rewind("ffff", 0), grpc::StatusCode::NOT_FOUND);
  v1::SessionRequest ex;
  ex.mutable_export_()->set_session_id("ffff");
  EXPECT_EQ(client_->Session(ex, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

// A NaN or infinite embedding value used to be accepted and make every later
// logit of the session NaN (issue 16, item 5): now INVALID_ARGUMENT, and the
// session continues exactly as a fork taken before the refused requests.
TEST_F(ServiceTest, NonFiniteEmbeddingValuesAreRefusedAndChangeNothing) {
  v1::ListModelsResponse models;
  ASSERT_TRUE(client_->ListModels(&models).ok());
  std::string model;
  int32_t width = 0;
  for (const auto& m : models.models()) {
    if (m.accepts_embeddings()) {
      model = m.name();
      width = m.n_embd();
    }
  }
  ASSERT_FALSE(model.empty()) << "no built-in model takes embedding chunks";
  auto with_chunk = [&](float bad, int bad_index) {
    GenerateRequest r = Req(model, Ids(3, 350), 4);
    auto* emb = r.add_parts()->mutable_embeddings();
    emb->set_width(width);
    emb->set_nx(2);
    emb->set_ny(1);
    for (int i = 0; i < 2 * width; ++i) emb->add_values(i == bad_index ? bad : 0.01f * static_cast<float>(i % 7));
    r.add_parts()->mutable_tokens()->add_ids(360);
    return r;
  };
  GenerateRequest t1 = Req(model, Ids(12), 3);
  t1.set_session_id(client_->Create(model));
  t1.set_append(true);
  ASSERT_TRUE(client_->Generate(t1).status.ok());
  const std::string sid = t1.session_id();
  const std::string forked = client_->Fork(sid);
  const auto before = client_->Get(sid);
  ASSERT_TRUE(before.ok());

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [bad, index] : {std::pair{nan, 0}, std::pair{inf, width + 3}, std::pair{-inf, 2 * width - 1}}) {
    SCOPED_TRACE(bad);
    GenerateRequest r = with_chunk(bad, index);
    r.set_session_id(sid);
    r.set_append(true);
    Result res = client_->Generate(r);
    EXPECT_EQ(res.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(res.status.error_message().find(
                  absl::StrCat("row ", index / width, ", column ", index % width, " is not finite")),
              std::string::npos)
        << res.status.error_message();
    EXPECT_TRUE(res.ids.empty());
    // Sessionless too.
    EXPECT_EQ(client_->Generate(with_chunk(bad, index)).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const auto after = client_->Get(sid);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->tokens(), before->tokens());
  EXPECT_TRUE(std::equal(after->token_ids().begin(), after->token_ids().end(), before->token_ids().begin(),
                         before->token_ids().end()));
  // The same finite chunk on the session and on the fork: same reply.
  GenerateRequest good = with_chunk(0.5f, 0);
  good.set_append(true);
  good.set_session_id(sid);
  Result on_session = client_->Generate(good);
  good.set_session_id(forked);
  Result on_fork = client_->Generate(good);
  ASSERT_TRUE(on_session.status.ok()) << on_session.status.error_message();
  ASSERT_TRUE(on_fork.status.ok()) << on_fork.status.error_message();
  EXPECT_EQ(on_session.ids.size(), 4u);
  EXPECT_EQ(on_session.ids, on_fork.ids);
}

TEST_F(ServiceTest, ConcurrentRequestsAreBatchedAndExact) {
  // Sequential references first, then the same requests at once.
  std::vector<GenerateRequest> reqs;
  std::vector<std::vector<int32_t>> want;
  for (int i = 0; i < 6; ++i) {
    const char* model = i % 3 == 0 ? kTf : (i % 3 == 1 ? kRec : kHyb);
    reqs.push_back(Req(model, Ids(10 + i, 300 + 13 * i), 20));
    Result r = client_->Generate(reqs.back());
    ASSERT_TRUE(r.status.ok());
    want.push_back(r.ids);
  }
  std::vector<Result> got(reqs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] {
      Client c(server_->port());
      got[i] = c.Generate(reqs[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message();
    EXPECT_EQ(got[i].ids, want[i]) << "request " << i;
  }
}

TEST_F(ServiceTest, SessionlessRequestsShareThePrefixCache) {
  // A system prompt marked as a message: the policy keeps a checkpoint at
  // the boundary (needed by recurrent state), so another conversation with
  // the same system prompt starts from it.
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::vector<int32_t> system = Ids(64, 311);
    auto with_user = [&](int32_t base) {
      GenerateRequest r = Req(model, system, 3);
      r.add_parts()->set_message_boundary(true);
      for (int32_t id : Ids(5, base)) r.add_parts()->mutable_tokens()->add_ids(id);
      return r;
    };
    Result a = client_->Generate(with_user(470));
    ASSERT_TRUE(a.status.ok());
    Result b = client_->Generate(with_user(480));
    ASSERT_TRUE(b.status.ok());
    EXPECT_GE(b.prompt.reused_tokens(), 64);
    EXPECT_EQ(b.ids, client_->Generate(Req(model, Concat(system, Ids(5, 480)), 3)).ids);
  }
}

}  // namespace
}  // namespace cairn::service::e2e
