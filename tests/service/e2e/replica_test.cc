// Scale-out over real sockets: in-process servers on 127.0.0.1 (port 0)
// standing for replicas: client-chosen session ids, GenerateRequest
// create_session, the x-cairn-replica metadata, a session directory two
// replicas share (signed with a shared --snapshot-key or isolated), and
// import under the exported id (a drain).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cairn/v1/inference.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/fault_env.h"

namespace cairn::service {
namespace {

namespace fs = std::filesystem;
constexpr char kModel[] = "demo-hybrid";

struct Reply {
  grpc::Status status;
  v1::PromptInfo prompt;
  std::vector<int32_t> ids;
  std::string replica;
};

class Replica {
 public:
  explicit Replica(const std::string& name, const std::string& session_dir = "", std::vector<std::string> tokens = {},
                   const std::string& snapshot_key = "", checkpoint::Env* session_dir_env = nullptr) {
    ServerOptions opt = e2e::TestServerOptions();
    opt.models_options.threads = 1;
    opt.replica_name = name;
    opt.session_dir = session_dir;
    opt.auth_tokens = std::move(tokens);
    opt.snapshot_key = snapshot_key;
    opt.session_dir_env = session_dir_env;
    auto s = Server::Create(opt);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return;
    server_ = std::move(*s);
    stub_ = v1::Inference::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  bool ok() const { return server_ != nullptr; }

  Reply Generate(const v1::GenerateRequest& req, const std::string& token = "") {
    grpc::ClientContext ctx;
    Prepare(ctx, token, req.session_id());
    Reply r;
    auto reader = stub_->Generate(&ctx, req);
    v1::GenerateResponse ev;
    while (reader->Read(&ev)) {
      if (ev.has_prompt()) r.prompt = ev.prompt();
      if (ev.has_token()) r.ids.push_back(ev.token().id());
    }
    r.status = reader->Finish();
    auto it = ctx.GetServerInitialMetadata().find("x-cairn-replica");
    if (it != ctx.GetServerInitialMetadata().end()) r.replica.assign(it->second.data(), it->second.size());
    return r;
  }
  grpc::Status Session(const v1::SessionRequest& req, v1::SessionResponse* resp, const std::string& token = "") {
    grpc::ClientContext ctx;
    Prepare(ctx, token, "");
    return stub_->SessionControl(&ctx, req, resp);
  }
  grpc::StatusCode Create(const std::string& id, const std::string& token = "") {
    v1::SessionRequest req;
    req.mutable_create()->set_model(kModel);
    req.mutable_create()->set_session_id(id);
    v1::SessionResponse resp;
    grpc::Status st = Session(req, &resp, token);
    if (st.ok()) {
      EXPECT_EQ(resp.session().session_id(), id);
    }
    return st.error_code();
  }
  // The session's history; empty with the error code in `code`.
  std::vector<int32_t> History(const std::string& id, grpc::StatusCode* code = nullptr, const std::string& token = "") {
    v1::SessionRequest req;
    req.mutable_get()->set_session_id(id);
    req.mutable_get()->set_include_tokens(true);
    v1::SessionResponse resp;
    grpc::Status st = Session(req, &resp, token);
    if (code != nullptr) *code = st.error_code();
    return {resp.session().token_ids().begin(), resp.session().token_ids().end()};
  }

 private:
  static void Prepare(grpc::ClientContext& ctx, const std::string& token, const std::string& key) {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    if (!key.empty()) ctx.AddMetadata("x-cairn-session", key);
  }
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

v1::GenerateRequest Turn(const std::string& session, std::vector<int32_t> ids, bool append) {
  v1::GenerateRequest r;
  r.set_model(kModel);
  r.set_session_id(session);
  r.set_append(append);
  for (int32_t id : ids) r.add_parts()->mutable_tokens()->add_ids(id);
  r.mutable_stop()->set_max_tokens(8);
  r.mutable_stop()->set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

std::vector<int32_t> Ids(int n, int32_t base) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(base + (i * 31) % 300);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cairn-replica-test-XXXXXX";
    path_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ReplicaTest, ClientChosenSessionIds) {
  Replica r("r1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.Create("conv-1_A"), grpc::StatusCode::OK);
  EXPECT_EQ(r.Create("conv-1_A"), grpc::StatusCode::ALREADY_EXISTS);
  for (const std::string& bad : std::vector<std::string>{"a/b", "..", "a b", std::string(129, 'x')}) {
    EXPECT_EQ(r.Create(bad), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  // Every response names its replica.
  Reply rep = r.Generate(Turn("conv-1_A", Ids(10, 300), true));
  ASSERT_TRUE(rep.status.ok()) << rep.status.error_message();
  EXPECT_EQ(rep.replica, "r1");
}

TEST(ReplicaTest, CreateSessionContinuesAConversationFromTheWholeOfIt) {
  Replica r("r1");
  ASSERT_TRUE(r.ok());
  const auto conversation = Ids(40, 300);
  v1::GenerateRequest req = Turn("lost-1", conversation, false);
  EXPECT_EQ(r.Generate(req).status.error_code(), grpc::StatusCode::NOT_FOUND);  // not asked to create
  req.set_create_session(true);
  Reply created = r.Generate(req);
  ASSERT_TRUE(created.status.ok()) << created.status.error_message();
  EXPECT_EQ(created.prompt.session_id(), "lost-1");
  EXPECT_EQ(r.History("lost-1"), Concat(conversation, created.ids));
  // The same as a fresh computation without a session.
  Reply fresh = r.Generate(Turn("", conversation, false));
  EXPECT_EQ(created.ids, fresh.ids);
  // Again with create_session: the session exists, so it is continued.
  Reply again = r.Generate(req);
  EXPECT_GE(again.prompt.reused_tokens(), 39);
  // Not with an appended prompt, nor without a session id; nothing changes.
  v1::GenerateRequest bad = Turn("lost-2", conversation, true);
  bad.set_create_session(true);
  EXPECT_EQ(r.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = Turn("", conversation, false);
  bad.set_create_session(true);
  EXPECT_EQ(r.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = Turn("bad/id", conversation, false);
  bad.set_create_session(true);
  EXPECT_EQ(r.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::StatusCode code;
  r.History("lost-2", &code);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
}

// Found by the soak (a server killed after a turn on a full disk came back
// with the turn before it): a turn whose session file could not be written
// left the older file, which another replica then served as the session.
// Now the older file goes: NOT_FOUND, and the client re-sends what it has.
TEST(ReplicaTest, ASessionWhoseLatestStateCouldNotBeWrittenIsNeverServedStale) {
  TempDir dir;
  testing::FaultEnv env;
  Replica a("a", dir.path(), {}, "", &env), b("b", dir.path());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a.Create("full-disk-1"), grpc::StatusCode::OK);
  Reply t1 = a.Generate(Turn("full-disk-1", Ids(10, 300), true));
  ASSERT_TRUE(t1.status.ok()) << t1.status.error_message();
  env.Fail(testing::FaultEnv::Op::kWrite, "/full-disk-1.session", ENOSPC);
  Reply t2 = a.Generate(Turn("full-disk-1", Ids(4, 400), true));
  ASSERT_TRUE(t2.status.ok()) << t2.status.error_message();
  EXPECT_EQ(env.failures(), 1);
  EXPECT_EQ(a.History("full-disk-1"), Concat(Concat(Concat(Ids(10, 300), t1.ids), Ids(4, 400)), t2.ids));
  grpc::StatusCode code = grpc::StatusCode::OK;
  const std::vector<int32_t> on_b = b.History("full-disk-1", &code);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND) << "served " << on_b.size() << " tokens";
}

TEST(ReplicaTest, ReplicasSharingASessionDirectoryContinueEachOthersSessions) {
  TempDir dir;
  Replica a("a", dir.path()), b("b", dir.path()), fresh("fresh");
  ASSERT_TRUE(a.ok() && b.ok() && fresh.ok());
  ASSERT_EQ(a.Create("shared-1"), grpc::StatusCode::OK);
  EXPECT_EQ(b.Create("shared-1"), grpc::StatusCode::ALREADY_EXISTS);  // taken in the directory
  std::vector<int32_t> all = Ids(30, 300);
  Reply t1 = a.Generate(Turn("shared-1", all, true));
  ASSERT_TRUE(t1.status.ok());
  all = Concat(all, t1.ids);
  // "a" went away: "b" continues the session from its persisted state.
  const auto more = Ids(6, 500);
  Reply t2 = b.Generate(Turn("shared-1", more, true));
  ASSERT_TRUE(t2.status.ok()) << t2.status.error_message();
  EXPECT_EQ(t2.replica, "b");
  EXPECT_GE(t2.prompt.reused_tokens(), static_cast<int>(all.size()) - 1);  // the state, not a recomputation
  all = Concat(all, more);
  Reply ref = fresh.Generate(Turn("", all, false));
  EXPECT_EQ(t2.ids, ref.ids);
  all = Concat(all, t2.ids);
  // Back on "a": its live copy is stale, the directory's is used.
  EXPECT_EQ(a.History("shared-1"), all);
  const auto last = Ids(5, 600);
  Reply t3 = a.Generate(Turn("shared-1", last, true));
  ASSERT_TRUE(t3.status.ok());
  all = Concat(all, last);
  EXPECT_EQ(t3.ids, fresh.Generate(Turn("", all, false)).ids);
  // Deleted on "b": gone on "a" too.
  v1::SessionRequest del;
  del.mutable_delete_()->set_session_id("shared-1");
  v1::SessionResponse resp;
  ASSERT_TRUE(b.Session(del, &resp).ok());
  grpc::StatusCode code;
  a.History("shared-1", &code);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
}

// A session restored from the directory continues from its state either
// way; the state serves other requests' prefixes only when the replicas
// share a --snapshot-key (the file's signature authenticates it).
TEST(ReplicaTest, RestoredStateSharesItsPrefixOnlyWithASnapshotKey) {
  for (const std::string key : {"", "replicas-shared-secret-0123"}) {
    SCOPED_TRACE(key.empty() ? "no key" : "shared key");
    TempDir dir;
    Replica a("a", dir.path(), {}, key), b("b", dir.path(), {}, key), fresh("fresh");
    ASSERT_TRUE(a.ok() && b.ok() && fresh.ok());
    ASSERT_EQ(a.Create("keyed"), grpc::StatusCode::OK);
    std::vector<int32_t> all = Ids(30, 300);
    Reply t1 = a.Generate(Turn("keyed", all, true));
    ASSERT_TRUE(t1.status.ok());
    all = Concat(Concat(all, t1.ids), Ids(6, 500));
    Reply t2 = b.Generate(Turn("keyed", Ids(6, 500), true));
    ASSERT_TRUE(t2.status.ok()) << t2.status.error_message();
    EXPECT_GE(t2.prompt.reused_tokens(), static_cast<int>(all.size()) - 7);  // from the persisted state
    // A sessionless request on "b" with the same conversation.
    Reply other = b.Generate(Turn("", all, false));
    ASSERT_TRUE(other.status.ok());
    EXPECT_EQ(other.ids, fresh.Generate(Turn("", all, false)).ids);
    if (key.empty()) {
      EXPECT_EQ(other.prompt.reused_tokens(), 0);
    } else {
      EXPECT_GT(other.prompt.reused_tokens(), 0);
    }
  }
}

TEST(ReplicaTest, PersistedSessionsKeepTheirOwner) {
  TempDir dir;
  Replica a("a", dir.path(), {"token-1", "token-2"}), b("b", dir.path(), {"token-1", "token-2"});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a.Create("owned-1", "token-1"), grpc::StatusCode::OK);
  grpc::StatusCode code;
  b.History("owned-1", &code, "token-2");
  EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED);
  b.History("owned-1", &code, "token-1");
  EXPECT_EQ(code, grpc::StatusCode::OK);
}

TEST(ReplicaTest, ImportKeepsTheExportedIdForADrain) {
  Replica a("a"), b("b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a.Create("drained-1"), grpc::StatusCode::OK);
  const auto prompt = Ids(25, 300);
  Reply t1 = a.Generate(Turn("drained-1", prompt, true));
  ASSERT_TRUE(t1.status.ok());
  v1::SessionRequest ex;
  ex.mutable_export_()->set_session_id("drained-1");
  v1::SessionResponse snapshot;
  ASSERT_TRUE(a.Session(ex, &snapshot).ok());
  v1::SessionRequest im;
  im.mutable_import()->set_snapshot(snapshot.snapshot());
  im.mutable_import()->set_session_id("drained-1");
  v1::SessionResponse imported;
  ASSERT_TRUE(b.Session(im, &imported).ok());
  EXPECT_EQ(imported.session().session_id(), "drained-1");
  EXPECT_EQ(b.Session(im, &imported).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  im.mutable_import()->set_session_id("no/slash");
  EXPECT_EQ(b.Session(im, &imported).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The imported session continues exactly where the original would.
  const auto more = Ids(4, 700);
  Reply on_b = b.Generate(Turn("drained-1", more, true));
  Reply on_a = a.Generate(Turn("drained-1", more, true));
  ASSERT_TRUE(on_b.status.ok() && on_a.status.ok());
  EXPECT_EQ(on_b.ids, on_a.ids);
  EXPECT_GE(on_b.prompt.reused_tokens(), static_cast<int>(prompt.size() + t1.ids.size()));
}

}  // namespace
}  // namespace cairn::service
