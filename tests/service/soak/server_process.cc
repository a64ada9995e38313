#include "tests/service/soak/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace cairn::soak {
namespace {

// The number after `prefix` in `line`, or 0.
int PortAfter(const std::string& line, const std::string& prefix) {
  const size_t at = line.find(prefix);
  int port = 0;
  if (at == std::string::npos || !absl::SimpleAtoi(line.substr(at + prefix.size()), &port)) return 0;
  return port;
}

// The whole HTTP response to GET /metrics on 127.0.0.1:port.
absl::StatusOr<std::string> HttpGetMetrics(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string response;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("metrics port ", port, ": ", std::strerror(errno)));
  }
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

}  // namespace

ServerProcess::ServerProcess(std::string binary, std::vector<std::string> args, std::vector<std::string> env)
    : binary_(std::move(binary)), args_(std::move(args)), env_(std::move(env)) {}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
}

absl::Status ServerProcess::Start() {
  {
    absl::MutexLock lock(&mu_);
    lines_.clear();
  }
  std::vector<std::string> argv = {binary_, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.insert(envs.end(), env_.begin(), env_.end());
  std::vector<char*> argp, envp;
  for (std::string& a : argv) argp.push_back(a.data());
  for (std::string& e : envs) envp.push_back(e.data());
  argp.push_back(nullptr);
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  // fork, not posix_spawn: the child asks to die with the soak
  // (PR_SET_PDEATHSIG), so a soak killed by a timeout leaves no server.
  // Between fork and exec only async-signal-safe calls.
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execve(binary_.c_str(), argp.data(), envp.data());
    ::_exit(127);
  }
  const int err = errno;
  ::close(fds[1]);
  if (pid_ < 0) {
    ::close(fds[0]);
    pid_ = -1;
    return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(err)));
  }
  reader_ = std::thread([this, fd = fds[0]] { ReadStderr(fd); });

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  port_ = metrics_port_ = 0;
  while (port_ == 0 || metrics_port_ == 0) {
    for (const std::string& line : LinesWith(" on port ")) {
      if (int p = PortAfter(line, "listening on port "); p != 0) port_ = p;
      if (int p = PortAfter(line, "metrics on port "); p != 0) metrics_port_ = p;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_ || std::chrono::steady_clock::now() > give_up) {
      Kill();
      absl::MutexLock lock(&mu_);
      return absl::UnavailableError(absl::StrCat("cairn-server did not start: ", absl::StrJoin(lines_, "\n")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::OkStatus();
}

void ServerProcess::ReadStderr(int fd) {
  std::string pending;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(pending.substr(0, eol));
    }
  }
  ::close(fd);
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);  // an earlier WNOHANG reap makes this ECHILD: fine
  pid_ = -1;
  if (reader_.joinable()) reader_.join();
}

absl::Status ServerProcess::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  ::kill(pid_, SIGTERM);
  int status = 0;
  const pid_t reaped = ::waitpid(pid_, &status, 0);
  pid_ = -1;
  if (reader_.joinable()) reader_.join();
  if (reaped < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("cairn-server did not exit cleanly (wait status ", status, ")"));
  }
  return absl::OkStatus();
}

size_t ServerProcess::RssBytes() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(status, line);) {
    size_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(6)), " kB"), &kib)) {
      return kib * 1024;
    }
  }
  return 0;
}

absl::StatusOr<std::map<std::string, double>> ServerProcess::Metrics() const {
  absl::StatusOr<std::string> response = HttpGetMetrics(metrics_port_);
  if (!response.ok()) return response.status();
  const size_t body = response->find("\r\n\r\n");
  if (response->rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) {
    return absl::InternalError("metrics: not a 200 response: " + response->substr(0, 200));
  }
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(absl::string_view(*response).substr(body + 4), '\n')) {
    const size_t space = line.rfind(' ');
    double value = 0;
    if (line.empty() || line[0] == '#' || space == absl::string_view::npos) continue;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

std::vector<std::string> ServerProcess::LinesWith(const std::string& needle) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const std::string& line : lines_) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace cairn::soak
