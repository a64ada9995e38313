// The command line of the cairn programs (cairn-server, cairn-cli,
// cairn-load), parsed one way: "--name=VALUE" or "--name VALUE" for a flag
// with a value, "--name" for a switch, "--help" or "-h" for the usage. An
// unknown flag, a missing value or a value a flag refuses is an error that
// names it: "PROGRAM: unknown argument '--x' (see --help)",
// "PROGRAM: bad value for --threads: 'x' (not an integer >= 0)".
//
// A main declares its flags with the destination of each value, then calls
// Parse once. Not thread-safe.
#ifndef CAIRN_SERVICE_PROGRAMS_FLAGS_H_
#define CAIRN_SERVICE_PROGRAMS_FLAGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn::service {

class FlagParser final {
 public:
  // `program` begins every error line.
  explicit FlagParser(std::string program) : program_(std::move(program)) {}

  // --name=VALUE: the value as it is, or appended (repeatable flag).
  void Add(std::string name, std::string* out);
  void Add(std::string name, std::vector<std::string>* out);
  // --name=N: a number of at least `min` (at most the type's maximum).
  void Add(std::string name, int32_t* out, int32_t min = std::numeric_limits<int32_t>::min());
  void Add(std::string name, int64_t* out, int64_t min = std::numeric_limits<int64_t>::min());
  void Add(std::string name, double* out, double min = std::numeric_limits<double>::lowest());
  // The same, left empty when the flag is not given.
  void Add(std::string name, std::optional<int64_t>* out);
  void Add(std::string name, std::optional<double>* out);
  // --name=VALUE given to `set`, whose error (its message) refuses the value.
  void Add(std::string name, std::function<absl::Status(const std::string&)> set);
  // --name: sets *out to true.
  void Switch(std::string name, bool* out);
  // --name or --name=VALUE: *given true, *value the value ("" without one).
  void OptionalValue(std::string name, bool* given, std::string* value);
  // Arguments that are not flags; without this they are errors.
  void Positional(std::vector<std::string>* out);
  // A parser for flags declared elsewhere (checkpoint::ApplyCheckpointFlag),
  // asked first about every "--name=VALUE" argument: true when it took it;
  // its error refuses the argument.
  void Delegate(std::function<absl::StatusOr<bool>(std::string_view arg)> take);

  enum class Outcome {
    kRun,    // every argument taken
    kHelp,   // --help: the usage went to stdout; exit 0
    kError,  // the error went to stderr; exit 2
  };
  // `usage` is printed as it is for --help.
  Outcome Parse(int argc, char** argv, std::string_view usage);
  // The exit status for an outcome other than kRun.
  static int ExitCode(Outcome outcome) { return outcome == Outcome::kHelp ? 0 : 2; }

 private:
  enum class Kind { kValue, kSwitch, kOptionalValue };
  struct Flag {
    std::string name;
    Kind kind = Kind::kValue;
    // Takes the value (kValue, kOptionalValue with a value); kSwitch and a
    // bare kOptionalValue get "".
    std::function<absl::Status(const std::string&)> set;
  };
  const Flag* Find(std::string_view name) const;
  // One argument (and the next, when it is the value): its error, if any.
  absl::Status Take(int argc, char** argv, int* i);

  std::string program_;
  std::vector<Flag> flags_;
  std::vector<std::string>* positional_ = nullptr;
  std::function<absl::StatusOr<bool>(std::string_view)> delegate_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_PROGRAMS_FLAGS_H_
