#include "service/programs/flags.h"

#include <cstdio>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cairn::service {
namespace {

// Sets *out (a T, or an optional one) to the value when it is a T >= min.
template <typename T, typename Out>
std::function<absl::Status(const std::string&)> NumberSetter(Out* out, T min, const char* kind) {
  return [out, min, kind](const std::string& v) {
    T x;
    bool parsed;
    if constexpr (std::is_floating_point_v<T>) {
      parsed = absl::SimpleAtod(v, &x);
    } else {
      parsed = absl::SimpleAtoi(v, &x);
    }
    if (!parsed || x < min) {
      if (min == std::numeric_limits<T>::lowest()) return absl::InvalidArgumentError(absl::StrCat("not ", kind));
      return absl::InvalidArgumentError(absl::StrCat("not ", kind, " >= ", min));
    }
    *out = x;
    return absl::OkStatus();
  };
}

}  // namespace

void FlagParser::Add(std::string name, std::string* out) {
  Add(std::move(name), [out](const std::string& v) {
    *out = v;
    return absl::OkStatus();
  });
}

void FlagParser::Add(std::string name, std::vector<std::string>* out) {
  Add(std::move(name), [out](const std::string& v) {
    out->push_back(v);
    return absl::OkStatus();
  });
}

void FlagParser::Add(std::string name, int32_t* out, int32_t min) {
  Add(std::move(name), NumberSetter(out, min, "an integer"));
}

void FlagParser::Add(std::string name, int64_t* out, int64_t min) {
  Add(std::move(name), NumberSetter(out, min, "an integer"));
}

void FlagParser::Add(std::string name, double* out, double min) {
  Add(std::move(name), NumberSetter(out, min, "a number"));
}

void FlagParser::Add(std::string name, std::optional<int64_t>* out) {
  Add(std::move(name), NumberSetter(out, std::numeric_limits<int64_t>::min(), "an integer"));
}

void FlagParser::Add(std::string name, std::optional<double>* out) {
  Add(std::move(name), NumberSetter(out, std::numeric_limits<double>::lowest(), "a number"));
}

void FlagParser::Add(std::string name, std::function<absl::Status(const std::string&)> set) {
  flags_.push_back({std::move(name), Kind::kValue, std::move(set)});
}

void FlagParser::Switch(std::string name, bool* out) {
  flags_.push_back({std::move(name), Kind::kSwitch, [out](const std::string&) {
                      *out = true;
                      return absl::OkStatus();
                    }});
}

void FlagParser::OptionalValue(std::string name, bool* given, std::string* value) {
  flags_.push_back({std::move(name), Kind::kOptionalValue, [given, value](const std::string& v) {
                      *given = true;
                      *value = v;
                      return absl::OkStatus();
                    }});
}

void FlagParser::Positional(std::vector<std::string>* out) { positional_ = out; }

void FlagParser::Delegate(std::function<absl::StatusOr<bool>(std::string_view)> take) { delegate_ = std::move(take); }

const FlagParser::Flag* FlagParser::Find(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagParser::Take(int argc, char** argv, int* i) {
  const std::string arg = argv[*i];
  if (arg.rfind("--", 0) != 0 || arg == "--") {
    if (positional_ == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "'"));
    positional_->push_back(arg);
    return absl::OkStatus();
  }
  const size_t eq = arg.find('=');
  if (eq != std::string::npos && delegate_) {
    absl::StatusOr<bool> taken = delegate_(arg);
    if (!taken.ok()) return taken.status();
    if (*taken) return absl::OkStatus();
  }
  const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  const Flag* flag = Find(name);
  if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "'"));
  std::string value;
  if (eq != std::string::npos) {
    if (flag->kind == Kind::kSwitch) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    value = arg.substr(eq + 1);
  } else if (flag->kind == Kind::kValue) {
    if (*i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    value = argv[++*i];
  }
  if (absl::Status st = flag->set(value); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad value for --", name, ": '", value, "' (", st.message(), ")"));
  }
  return absl::OkStatus();
}

FlagParser::Outcome FlagParser::Parse(int argc, char** argv, std::string_view usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      return Outcome::kHelp;
    }
    if (absl::Status st = Take(argc, argv, &i); !st.ok()) {
      std::fprintf(stderr, "%s: %s (see --help)\n", program_.c_str(), std::string(st.message()).c_str());
      return Outcome::kError;
    }
  }
  return Outcome::kRun;
}

}  // namespace cairn::service
