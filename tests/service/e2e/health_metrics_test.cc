// End-to-end tests (service_fixture.h): health checking, reflection and the metrics of a running
// server.
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

TEST_F(ServiceTest, HealthAndReflectionAreServed) {
  grpc::GenericStub generic(client_->channel().shared_from_this());
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest: the
  // response is field 1 (status) = 1 (SERVING), i.e. bytes 08 01.
  grpc::ClientContext ctx;
  grpc::Slice empty_slice(std::string(""));
  grpc::ByteBuffer request(&empty_slice, 1);  // an empty HealthCheckRequest
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = s;
                      done = true;
                      cv.notify_all();
                    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));

  // Reflection: ServerReflectionInfo with list_services (field 7) = "".
  grpc::ClientContext rctx;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(&rctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice req_slice(std::string("\x3a\x00", 2));
  grpc::ByteBuffer req_buf(&req_slice, 1);
  call->Write(req_buf, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer resp_buf;
  call->Read(&resp_buf, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> rs;
  ASSERT_TRUE(resp_buf.Dump(&rs).ok());
  std::string rbytes;
  for (const auto& s : rs) rbytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_NE(rbytes.find("cairn.v1.Inference"), std::string::npos);
  EXPECT_NE(rbytes.find("grpc.health.v1.Health"), std::string::npos);
  grpc::Status fin;
  call->Finish(&fin, reinterpret_cast<void*>(5));
  while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(5)) {
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(ServiceTest, MetricsCountTokens) {
  ASSERT_TRUE(client_->Generate(Req(kTf, Ids(5), 4)).status.ok());
  const std::string text = server_->metrics().Render();
  EXPECT_NE(text.find("cairn_generated_tokens_total"), std::string::npos);
  EXPECT_NE(text.find("cairn_time_to_first_token_seconds_count"), std::string::npos);
  EXPECT_EQ(text.find("cairn_generated_tokens_total 0\n"), std::string::npos);
}

}  // namespace
}  // namespace cairn::service::e2e
