// End-to-end tests (service_fixture.h): session snapshots: a tampered or forged export is refused
// or isolated; signed exports are trusted only with the same key.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/sessions/snapshot_seal.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// Session snapshots carry a checksum and, with --snapshot-key, a signature
// (service/sessions/snapshot_seal.h). Imported state the server cannot authenticate
// serves its own session and forks only, never the shared prefix cache.
class SnapshotIntegrityTest : public ::testing::Test {
 protected:
  // A server with the built-in models and `key` as its snapshot key.
  static std::unique_ptr<Server> Start(const std::string& key) {
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    opt.snapshot_key = key;
    auto s = Server::Create(opt);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // A session on `c` that absorbed `prompt` (then a message boundary and a
  // 4-token reply), exported.
  static v1::SessionSnapshot ExportAfter(Client& c, const std::string& model, const std::vector<int32_t>& prompt) {
    const std::string sid = c.Create(model);
    GenerateRequest t = Req(model, prompt, 4);
    t.add_parts()->set_message_boundary(true);
    t.set_session_id(sid);
    t.set_append(true);
    EXPECT_TRUE(c.Generate(t).status.ok());
    v1::SessionRequest ex;
    ex.mutable_export_()->set_session_id(sid);
    v1::SessionResponse resp;
    EXPECT_TRUE(c.Session(ex, &resp).ok());
    v1::SessionSnapshot snap;
    EXPECT_TRUE(snap.ParseFromString(resp.snapshot()));
    return snap;
  }
  static std::vector<int32_t> TokensOf(const v1::SessionSnapshot& snap) {
    std::vector<int32_t> ids;
    for (const auto& item : snap.history()) ids.push_back(item.token());
    return ids;
  }
  static grpc::Status Import(Client& c, const v1::SessionSnapshot& snap, std::string* id) {
    v1::SessionRequest im;
    im.mutable_import()->set_snapshot(snap.SerializeAsString());
    v1::SessionResponse resp;
    grpc::Status st = c.Session(im, &resp);
    *id = resp.session().session_id();
    return st;
  }
  // Largest difference between two runs' logprobs (infinite when their
  // lengths differ): cached and recomputed logits agree within float
  // rounding (batch shapes change the summation order), not bit for bit.
  static float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
    float d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
  }
  static constexpr float kTolerance = 1e-4f;
  static GenerateRequest WithLogprobs(GenerateRequest r) {
    r.set_logprobs(true);
    return r;
  }
  const std::vector<int32_t> prefix_ = Ids(40, 311);
  const std::vector<int32_t> suffix_ = Ids(6, 470);
};

TEST_F(SnapshotIntegrityTest, TamperedExportIsRefusedAndCreatesNothing) {
  std::unique_ptr<Server> server = Start("");
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const v1::SessionSnapshot good = ExportAfter(c, model, prefix_);
    ASSERT_FALSE(good.state().empty());
    ASSERT_FALSE(good.checksum().empty());
    EXPECT_TRUE(good.signature().empty());  // no key
    const size_t sessions = server->sessions().size();
    const size_t in_use = server->memory_budget().in_use();
    const uint64_t captures = (*server->models().Find(model))->engine->stats().captures;

    std::vector<v1::SessionSnapshot> bad(4, good);
    std::string& state = *bad[0].mutable_state();
    for (size_t i = state.size() / 2; i < state.size() / 2 + 16; ++i) state[i] = static_cast<char>(state[i] ^ 0x5a);
    bad[1].mutable_history(3)->set_token(bad[1].history(3).token() + 1);  // history edited, state kept
    bad[2].set_pos(bad[2].pos() - 1);
    bad[3].clear_checksum();
    for (size_t i = 0; i < bad.size(); ++i) {
      SCOPED_TRACE(i);
      std::string id;
      grpc::Status st = Import(c, bad[i], &id);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
      EXPECT_NE(st.error_message().find("checksum"), std::string::npos) << st.error_message();
    }
    EXPECT_EQ(server->sessions().size(), sessions);
    EXPECT_EQ(server->memory_budget().in_use(), in_use);
    EXPECT_EQ((*server->models().Find(model))->engine->stats().captures, captures);
    std::string id;
    EXPECT_TRUE(Import(c, good, &id).ok());  // the untouched export still imports
  }
}

TEST_F(SnapshotIntegrityTest, ForgedExportServesOnlyItsOwnSession) {
  // The exporter doubles as the reference: it never sees the forged import.
  std::unique_ptr<Server> reference = Start("");
  std::unique_ptr<Server> server = Start("");
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(server, nullptr);
  Client ref(reference->port());
  Client c(server->port());
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    // The history of one conversation with the state of another of the same
    // length, checksum recomputed (anyone can): valid, but wrong.
    v1::SessionSnapshot forged = ExportAfter(ref, model, prefix_);
    const v1::SessionSnapshot other = ExportAfter(ref, model, Ids(40, 512));
    ASSERT_EQ(forged.pos(), other.pos());
    forged.set_state(other.state());
    SealSnapshot("", &forged);
    std::string fid;
    grpc::Status st = Import(c, forged, &fid);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const std::vector<int32_t> history = TokensOf(forged);

    // Its own session continues from the imported state.
    GenerateRequest own = WithLogprobs(Req(model, suffix_, 6));
    own.set_session_id(fid);
    own.set_append(true);
    const Result r_own = c.Generate(own);
    ASSERT_TRUE(r_own.status.ok()) << r_own.status.error_message();
    EXPECT_GE(r_own.prompt.reused_tokens(), static_cast<int32_t>(history.size()));
    const GenerateRequest same = WithLogprobs(Req(model, Concat(history, suffix_), 6));
    const Result expected = ref.Generate(same);
    ASSERT_TRUE(expected.status.ok());
    ASSERT_GT(MaxDiff(r_own.logprobs, expected.logprobs), 0.01f);  // the forgery matters

    // A sessionless request and a new session with the same prefix are
    // exact, as on a server that never saw the import.
    const Result sessionless = c.Generate(same);
    ASSERT_TRUE(sessionless.status.ok());
    EXPECT_EQ(sessionless.ids, expected.ids);
    EXPECT_LE(MaxDiff(sessionless.logprobs, expected.logprobs), kTolerance);
    GenerateRequest fresh = same;
    fresh.set_session_id(c.Create(model));
    const Result in_session = c.Generate(fresh);
    ASSERT_TRUE(in_session.status.ok());
    EXPECT_EQ(in_session.ids, expected.ids);
    EXPECT_LE(MaxDiff(in_session.logprobs, expected.logprobs), kTolerance);

    // A fork of the imported session shares its (private) state.
    v1::SessionRequest fork;
    fork.mutable_fork()->set_session_id(fid);
    v1::SessionResponse resp;
    ASSERT_TRUE(c.Session(fork, &resp).ok());
    GenerateRequest on_fork = WithLogprobs(Req(model, Ids(3, 520), 2));
    on_fork.set_session_id(resp.session().session_id());
    on_fork.set_append(true);
    const Result r_fork = c.Generate(on_fork);
    ASSERT_TRUE(r_fork.status.ok());
    EXPECT_GT(r_fork.prompt.reused_tokens(), static_cast<int32_t>(history.size()));

    // Re-exported, the state is not signed even by a server with a key.
    v1::SessionRequest ex;
    ex.mutable_export_()->set_session_id(fid);
    ASSERT_TRUE(c.Session(ex, &resp).ok());
    v1::SessionSnapshot again;
    ASSERT_TRUE(again.ParseFromString(resp.snapshot()));
    EXPECT_TRUE(again.signature().empty());
  }
}

TEST_F(SnapshotIntegrityTest, SignedExportsAreTrustedOnlyWithTheSameKey) {
  const std::string key = "replica-secret-0123456789abcdef";
  std::unique_ptr<Server> exporter = Start(key);
  std::unique_ptr<Server> same_key = Start(key);
  std::unique_ptr<Server> other_key = Start("another-secret-0123456789abcdef");
  ASSERT_NE(exporter, nullptr);
  ASSERT_NE(same_key, nullptr);
  ASSERT_NE(other_key, nullptr);
  Client ex(exporter->port());
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const v1::SessionSnapshot signed_snap = ExportAfter(ex, model, prefix_);
    ASSERT_FALSE(signed_snap.signature().empty());
    const std::vector<int32_t> history = TokensOf(signed_snap);
    const GenerateRequest same = WithLogprobs(Req(model, Concat(history, suffix_), 6));
    const Result expected = ex.Generate(same);
    ASSERT_TRUE(expected.status.ok());
    for (Server* importer : {same_key.get(), other_key.get()}) {
      const bool trusted = importer == same_key.get();
      SCOPED_TRACE(trusted ? "same key" : "other key");
      Client c(importer->port());
      std::string id;
      ASSERT_TRUE(Import(c, signed_snap, &id).ok());
      GenerateRequest own = WithLogprobs(Req(model, suffix_, 6));
      own.set_session_id(id);
      own.set_append(true);
      const Result r_own = c.Generate(own);
      ASSERT_TRUE(r_own.status.ok());
      EXPECT_LE(MaxDiff(r_own.logprobs, expected.logprobs), kTolerance);
      // Only trusted state serves another request's prefix.
      const Result sessionless = c.Generate(same);
      ASSERT_TRUE(sessionless.status.ok());
      EXPECT_LE(MaxDiff(sessionless.logprobs, expected.logprobs), kTolerance);
      if (trusted) {
        EXPECT_GE(sessionless.prompt.reused_tokens(), static_cast<int32_t>(history.size()));
      } else {
        EXPECT_EQ(sessionless.prompt.reused_tokens(), 0);
      }
    }
  }
}

}  // namespace
}  // namespace cairn::service::e2e
