// ServerProcess: a real cairn-server as a child process of the soak, so that
// it can be killed (SIGKILL) and restarted on the same session directory and
// disk tier. It listens on 127.0.0.1 port 0 (gRPC and /metrics); the ports
// and every line of its stderr are read from a pipe.
//
// Not thread-safe except where noted: the soak's main thread starts, kills
// and stops it while no call runs.
#ifndef CAIRN_TESTS_SERVICE_SOAK_SERVER_PROCESS_H_
#define CAIRN_TESTS_SERVICE_SOAK_SERVER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cairn::soak {

class ServerProcess final {
 public:
  // `binary` with `args` (plus --listen and --metrics-listen on port 0);
  // `env` entries (NAME=VALUE) are added to the inherited environment.
  ServerProcess(std::string binary, std::vector<std::string> args, std::vector<std::string> env);
  ~ServerProcess();  // kills a running child

  // Starts the child and waits (up to 60 s) for both ports. UNAVAILABLE
  // when it exits or does not listen in time (with its last stderr lines).
  absl::Status Start();
  // SIGKILL, and reaps the child.
  void Kill();
  // SIGTERM and waits for a clean exit: INTERNAL when it is not clean.
  absl::Status Stop();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Resident set size from /proc; 0 when unknown.
  size_t RssBytes() const;
  // GET /metrics: each sample line's value by its full name with labels.
  absl::StatusOr<std::map<std::string, double>> Metrics() const;
  // Stderr lines of the current run containing `needle` (thread-safe).
  std::vector<std::string> LinesWith(const std::string& needle) const;

 private:
  void ReadStderr(int fd);

  const std::string binary_;
  const std::vector<std::string> args_;
  const std::vector<std::string> env_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::soak

#endif  // CAIRN_TESTS_SERVICE_SOAK_SERVER_PROCESS_H_
