#include "checkpoint/injected_faults.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace cairn::checkpoint {
namespace {

// Reads pass through `real` unless the draw made at open time says fail.
class FaultyFile final : public RandomAccessFile {
 public:
  FaultyFile(std::unique_ptr<RandomAccessFile> real, std::string path)
      : real_(std::move(real)), path_(std::move(path)) {}
  const FileInfo& info() const override { return real_->info(); }
  absl::Status Read(uint64_t, std::span<std::byte>) override { return PosixError("read " + path_, EIO); }

 private:
  std::unique_ptr<RandomAccessFile> real_;
  std::string path_;
};

class InjectingEnv final : public Env {
 public:
  // probability 1 with ENOSPC on writes only: the full disk.
  InjectingEnv(Env* base, bool full, double probability, uint64_t seed)
      : base_(base), full_(full), probability_(probability), rng_(seed) {}

  absl::Status CreateDir(const std::string& dir) override { return base_->CreateDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override { return base_->ListDir(dir); }
  absl::StatusOr<FileInfo> Stat(const std::string& path) override { return base_->Stat(path); }
  absl::Status DeleteFile(const std::string& path) override { return base_->DeleteFile(path); }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    auto file = base_->OpenForRead(path);
    if (!file.ok() || full_ || !Draw("read", path, EIO)) return file;
    return std::make_unique<FaultyFile>(std::move(*file), path);
  }
  absl::StatusOr<FileInfo> WriteFileAtomically(const std::string& path, const std::string& tmp_path,
                                               std::span<const std::span<const std::byte>> parts) override {
    const int err = full_ ? ENOSPC : EIO;
    if (Draw("write", path, err)) return PosixError("write " + tmp_path, err);
    return base_->WriteFileAtomically(path, tmp_path, parts);
  }

 private:
  // Whether this call fails; logs the fault.
  bool Draw(const char* op, const std::string& path, int err) {
    bool fail = full_;
    if (!fail) {
      absl::MutexLock lock(&mu_);
      fail = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < probability_;
    }
    if (fail) std::fprintf(stderr, "cairn: injected disk fault: %s %s: errno %d\n", op, path.c_str(), err);
    return fail;
  }

  Env* const base_;
  const bool full_;
  const double probability_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Env>> InjectedFaultsEnv(absl::string_view spec, Env* base) {
  if (spec == "full") return std::make_unique<InjectingEnv>(base, true, 1.0, 0);
  const std::vector<absl::string_view> fields = absl::StrSplit(spec, ':');
  double probability = -1;
  uint64_t seed = 1;
  if (fields.size() < 2 || fields.size() > 3 || fields[0] != "failing" || !absl::SimpleAtod(fields[1], &probability) ||
      !(probability >= 0 && probability <= 1) || (fields.size() == 3 && !absl::SimpleAtoi(fields[2], &seed))) {
    return absl::InvalidArgumentError(
        absl::StrCat(kDiskFaultsVariable, ": expected 'full' or 'failing:P[:SEED]' (0 <= P <= 1), got '", spec, "'"));
  }
  return std::make_unique<InjectingEnv>(base, false, probability, seed);
}

}  // namespace cairn::checkpoint
