// Certificates made at test time with the openssl command, in a directory:
// server.{pem,key} (self-signed for localhost and 127.0.0.1), ca.{pem,key}
// and client.{pem,key} signed by that CA; and a second generation of each
// (server2, ca2, client2) for rotation. Shared by the TLS tests of the gRPC
// port and of the HTTP door.
#ifndef CAIRN_TESTS_TESTING_TEST_CERTIFICATES_H_
#define CAIRN_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/testing/temp_dir.h"

namespace cairn::testing {

// False when openssl failed (the test asserts on it).
inline bool MakeTestCertificates(const std::string& dir) {
  std::string cmd = "cd '" + dir + "'";
  const auto quiet = [&cmd](const std::string& step) { cmd += " && openssl " + step + " >/dev/null 2>&1"; };
  for (const std::string gen : {"", "2"}) {
    quiet("req -x509 -newkey rsa:2048 -nodes -keyout server" + gen + ".key -out server" + gen +
          ".pem -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1");
    quiet("req -x509 -newkey rsa:2048 -nodes -keyout ca" + gen + ".key -out ca" + gen +
          ".pem -days 1 -subj /CN=cairn-test-ca" + gen);
    quiet("req -newkey rsa:2048 -nodes -keyout client" + gen + ".key -out client" + gen + ".csr -subj /CN=client" +
          gen);
    quiet("x509 -req -in client" + gen + ".csr -CA ca" + gen + ".pem -CAkey ca" + gen +
          ".key -CAcreateserial -out client" + gen + ".pem -days 1");
  }
  return std::system(cmd.c_str()) == 0;
}

// A file's bytes ("" when unreadable).
inline std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Puts `contents` at `path` by a rename, as a certificate rotation does.
inline void InstallTestFile(const std::string& path, const std::string& contents) {
  std::ofstream(path + ".new", std::ios::binary) << contents;
  std::filesystem::rename(path + ".new", path);
}

// A fresh directory with the certificates above, for a test suite
// (openssl takes seconds): made() is false when openssl failed.
class TestCertificateDir {
 public:
  explicit TestCertificateDir(const std::string& prefix)
      : dir_(prefix), made_(!dir_.path().empty() && MakeTestCertificates(dir_.path())) {}
  bool made() const { return made_; }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  bool made_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_TEST_CERTIFICATES_H_
