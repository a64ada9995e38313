// A fresh directory under /tmp for one test, removed with everything in it.
#ifndef CAIRN_TESTS_TESTING_TEMP_DIR_H_
#define CAIRN_TESTS_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace cairn::testing {

class TempDir {
 public:
  // `prefix` names the test in /tmp's listing ("cairn-auth": /tmp/cairn-auth-XXXXXX).
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // "" when the directory could not be made (the test sees it).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_TEMP_DIR_H_
