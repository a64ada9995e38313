#include "service/programs/flags.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cairn::service {
namespace {

using Outcome = FlagParser::Outcome;

// Parses `args` (after a program name) and returns the outcome; what the
// parser printed to stderr goes to *err.
Outcome Parse(FlagParser& flags, std::vector<std::string> args, std::string* err = nullptr) {
  std::vector<char*> argv;
  std::string program = "prog";
  argv.push_back(program.data());
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStderr();
  const Outcome outcome = flags.Parse(static_cast<int>(argv.size()), argv.data(), "usage\n");
  const std::string printed = ::testing::internal::GetCapturedStderr();
  if (err != nullptr) *err = printed;
  return outcome;
}

TEST(FlagParserTest, ValuesWithEqualsOrAsTheNextArgument) {
  FlagParser flags("prog");
  std::string server;
  std::vector<std::string> models;
  int32_t threads = 0;
  double seconds = 0;
  bool exact = false;
  flags.Add("server", &server);
  flags.Add("model", &models);
  flags.Add("threads", &threads, 0);
  flags.Add("seconds", &seconds);
  flags.Switch("exact", &exact);
  EXPECT_EQ(Parse(flags, {"--server=h:1", "--model", "a=b", "--model=c", "--threads", "3", "--seconds=0.5", "--exact"}),
            Outcome::kRun);
  EXPECT_EQ(server, "h:1");
  EXPECT_EQ(models, (std::vector<std::string>{"a=b", "c"}));
  EXPECT_EQ(threads, 3);
  EXPECT_DOUBLE_EQ(seconds, 0.5);
  EXPECT_TRUE(exact);
}

TEST(FlagParserTest, ErrorsNameTheArgument) {
  FlagParser flags("prog");
  int32_t threads = 7;
  bool exact = false;
  std::string server;
  flags.Add("threads", &threads, 0);
  flags.Switch("exact", &exact);
  flags.Add("server", &server);
  std::string err;
  EXPECT_EQ(Parse(flags, {"--nope=1"}, &err), Outcome::kError);
  EXPECT_EQ(err, "prog: unknown argument '--nope=1' (see --help)\n");
  EXPECT_EQ(Parse(flags, {"--threads=-1"}, &err), Outcome::kError);
  EXPECT_EQ(err, "prog: bad value for --threads: '-1' (not an integer >= 0) (see --help)\n");
  EXPECT_EQ(Parse(flags, {"--threads=x"}, &err), Outcome::kError);
  EXPECT_EQ(threads, 7);
  EXPECT_EQ(Parse(flags, {"--exact=yes"}, &err), Outcome::kError);
  EXPECT_NE(err.find("--exact takes no value"), std::string::npos) << err;
  EXPECT_EQ(Parse(flags, {"--server"}, &err), Outcome::kError);
  EXPECT_NE(err.find("--server needs a value"), std::string::npos) << err;
  // Without Positional, a bare word is an error too.
  EXPECT_EQ(Parse(flags, {"word"}, &err), Outcome::kError);
  EXPECT_EQ(FlagParser::ExitCode(Outcome::kError), 2);
}

TEST(FlagParserTest, HelpPrintsTheUsage) {
  FlagParser flags("prog");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(Parse(flags, {"--help", "--nope"}), Outcome::kHelp);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "usage\n");
  EXPECT_EQ(FlagParser::ExitCode(Outcome::kHelp), 0);
}

TEST(FlagParserTest, PositionalOptionalValuesAndUnsetOptionals) {
  FlagParser flags("prog");
  std::vector<std::string> words;
  bool health = false;
  std::string service;
  std::optional<double> temperature;
  std::optional<int64_t> seed;
  flags.Positional(&words);
  flags.OptionalValue("health", &health, &service);
  flags.Add("temperature", &temperature);
  flags.Add("seed", &seed);
  EXPECT_EQ(Parse(flags, {"once", "--health", "upon", "--temperature=-1"}), Outcome::kRun);
  EXPECT_EQ(words, (std::vector<std::string>{"once", "upon"}));
  EXPECT_TRUE(health);
  EXPECT_EQ(service, "");
  ASSERT_TRUE(temperature.has_value());
  EXPECT_DOUBLE_EQ(*temperature, -1);
  EXPECT_FALSE(seed.has_value());
  EXPECT_EQ(Parse(flags, {"--health=cairn.v1.Inference"}), Outcome::kRun);
  EXPECT_EQ(service, "cairn.v1.Inference");
}

TEST(FlagParserTest, DelegateTakesItsFlagsFirst) {
  FlagParser flags("prog");
  std::vector<std::string> taken;
  std::string model;
  flags.Delegate([&](std::string_view arg) -> absl::StatusOr<bool> {
    if (arg.rfind("--checkpoint-", 0) != 0) return false;
    if (arg == "--checkpoint-ram=bad") return absl::InvalidArgumentError("bad size");
    taken.emplace_back(arg);
    return true;
  });
  flags.Add("model", &model);
  EXPECT_EQ(Parse(flags, {"--checkpoint-ram=1GiB", "--model=m"}), Outcome::kRun);
  EXPECT_EQ(taken, (std::vector<std::string>{"--checkpoint-ram=1GiB"}));
  EXPECT_EQ(model, "m");
  std::string err;
  EXPECT_EQ(Parse(flags, {"--checkpoint-ram=bad"}, &err), Outcome::kError);
  EXPECT_EQ(err, "prog: bad size (see --help)\n");
}

}  // namespace
}  // namespace cairn::service
