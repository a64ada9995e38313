// LargeWorkGate: small inputs never wait; at most `slots` large ones run at
// once, the others wait for a slot; results and values pass through.
#include "service/api/large_work_gate.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace cairn::service {
namespace {

TEST(LargeWorkGateTest, AtMostSlotsLargeOnesRunAtOnceAndSmallOnesNeverWait) {
  LargeWorkGate gate(/*large_bytes=*/100, /*slots=*/2);
  std::atomic<int> running{0}, most{0}, done{0};
  absl::Notification release;
  std::vector<std::thread> large;
  for (int i = 0; i < 6; ++i) {
    large.emplace_back([&] {
      const int r = gate.Run(101, [&] {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        release.WaitForNotification();
        --running;
        return 7;
      });
      EXPECT_EQ(r, 7);
      ++done;
    });
  }
  // Two large ones hold the slots and wait for `release`: a small input
  // still runs at once (this would hang if it waited for a slot).
  while (running.load() < 2) std::this_thread::yield();
  EXPECT_EQ(gate.Run(100, [] { return 3; }), 3);
  EXPECT_EQ(done.load(), 0);
  release.Notify();
  for (std::thread& t : large) t.join();
  EXPECT_EQ(done.load(), 6);
  EXPECT_EQ(most.load(), 2);
}

}  // namespace
}  // namespace cairn::service
