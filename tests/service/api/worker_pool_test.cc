#include "service/api/worker_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cairn::service {
namespace {

TEST(WorkerPoolTest, TasksRunOnOtherThreadsAndNeverWaitForOne) {
  constexpr int kBlocked = 4;
  absl::Notification release;
  absl::Mutex mu;
  int started = 0;
  std::vector<std::thread::id> ids;
  // Declared after what its tasks use, so its threads are joined before that
  // goes: a task woken by Notify may still be inside WaitForNotification
  // (re-taking the notification's mutex) after the test body has ended
  // (ThreadSanitizer saw the mutex destroyed under it).
  WorkerPool pool;
  for (int i = 0; i < kBlocked; ++i) {
    pool.Run([&] {
      {
        absl::MutexLock lock(&mu);
        ++started;
        ids.push_back(std::this_thread::get_id());
      }
      release.WaitForNotification();
    });
  }
  // Every blocked task started: a task never waits for another's thread.
  {
    absl::MutexLock lock(&mu);
    auto all = [&] { return started == kBlocked; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(60)));
    for (std::thread::id id : ids) EXPECT_NE(id, std::this_thread::get_id());
  }
  EXPECT_EQ(pool.threads(), static_cast<size_t>(kBlocked));
  release.Notify();
}

TEST(WorkerPoolTest, IdleThreadsAreReused) {
  WorkerPool pool;
  for (int i = 0; i < 10; ++i) {
    absl::Notification done;
    pool.Run([&] { done.Notify(); });
    done.WaitForNotification();
    // Time for the thread to wait for the next task (a task queued before
    // it does gets a thread of its own).
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LE(pool.threads(), 2u);  // not one per task
}

TEST(WorkerPoolTest, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool;
    for (int i = 0; i < 8; ++i) pool.Run([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 8);
}

}  // namespace
}  // namespace cairn::service
