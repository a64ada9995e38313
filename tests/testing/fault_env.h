// FaultEnv: the default Env with chosen operations failing, for tests of
// what the checkpoint store and the session directory do when the disk
// fails. Everything not told to fail goes to the real file system.
#ifndef CAIRN_TESTS_TESTING_FAULT_ENV_H_
#define CAIRN_TESTS_TESTING_FAULT_ENV_H_

#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/env.h"

namespace cairn::testing {

class FaultEnv final : public checkpoint::Env {
 public:
  enum class Op { kWrite, kRead, kDelete, kList };

  // The next `times` calls of `op` on a path containing `path_part` fail
  // with errno `err` (kRead: the file opens, its reads fail).
  void Fail(Op op, std::string path_part, int err, int times = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_[op].push_back(Fault{std::move(path_part), err, times});
  }
  // How many calls failed so far.
  int failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

  absl::Status CreateDir(const std::string& dir) override { return base_->CreateDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    if (int err = Take(Op::kList, dir)) return checkpoint::PosixError("open directory " + dir, err);
    return base_->ListDir(dir);
  }
  absl::StatusOr<checkpoint::FileInfo> Stat(const std::string& path) override { return base_->Stat(path); }
  absl::StatusOr<std::unique_ptr<checkpoint::RandomAccessFile>> OpenForRead(const std::string& path) override {
    auto file = base_->OpenForRead(path);
    if (!file.ok()) return file;
    if (int err = Take(Op::kRead, path)) return std::make_unique<FailingFile>(std::move(*file), path, err);
    return file;
  }
  absl::StatusOr<checkpoint::FileInfo> WriteFileAtomically(const std::string& path, const std::string& tmp_path,
                                                           std::span<const std::span<const std::byte>> parts) override {
    // As the real one after a failed write(2) or rename(2): nothing changed.
    if (int err = Take(Op::kWrite, path)) return checkpoint::PosixError("write " + tmp_path, err);
    return base_->WriteFileAtomically(path, tmp_path, parts);
  }
  absl::Status DeleteFile(const std::string& path) override {
    if (int err = Take(Op::kDelete, path)) return checkpoint::PosixError("delete " + path, err);
    return base_->DeleteFile(path);
  }

 private:
  struct Fault {
    std::string path_part;
    int err;
    int times;
  };
  class FailingFile final : public checkpoint::RandomAccessFile {
   public:
    FailingFile(std::unique_ptr<checkpoint::RandomAccessFile> real, std::string path, int err)
        : real_(std::move(real)), path_(std::move(path)), err_(err) {}
    const checkpoint::FileInfo& info() const override { return real_->info(); }
    absl::Status Read(uint64_t, std::span<std::byte>) override { return checkpoint::PosixError("read " + path_, err_); }

   private:
    std::unique_ptr<checkpoint::RandomAccessFile> real_;
    std::string path_;
    int err_;
  };

  // The errno of a fault that applies to this call (consumed), or 0.
  int Take(Op op, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Fault& f : faults_[op]) {
      if (f.times > 0 && path.find(f.path_part) != std::string::npos) {
        --f.times;
        ++failures_;
        return f.err;
      }
    }
    return 0;
  }

  checkpoint::Env* const base_ = checkpoint::Env::Default();
  mutable std::mutex mu_;
  std::map<Op, std::vector<Fault>> faults_;
  int failures_ = 0;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_FAULT_ENV_H_
