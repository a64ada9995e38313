// The global functions: Jinja2's (range, namespace, dict, cycler, joiner)
// and transformers' (raise_exception, strftime_now).
#include "absl/time/time.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

// The sandbox's bound on range().
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(Renderer& r, CallArgs args) {
  if (!args.keyword.empty()) return TypeError("range() takes no keyword arguments");
  const size_t n = args.positional.size();
  if (n < 1 || n > 3) return TypeError(Cat("range expected at most 3 arguments, got ", n));
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < n; ++i) {
    const Value& a = args.positional[i];
    if (a.is_undefined()) return UndefinedFailure(a);
    if (!a.is_int() && !a.is_bool()) {
      return TypeError(Cat("'", PyTypeName(a), "' object cannot be interpreted as an integer"));
    }
  }
  if (n == 1) {
    v[1] = args.positional[0].i();
  } else {
    v[0] = args.positional[0].i();
    v[1] = args.positional[1].i();
    if (n == 3) v[2] = args.positional[2].i();
  }
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) return ValueError("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 length = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (length > kMaxRange) {
    return TemplateFailure(kOverflowError,
                           Cat("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ")."));
  }
  JINJA_RETURN_IF_ERROR(r.Charge(static_cast<size_t>(length) * sizeof(Value)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(length));
  for (int64_t i = 0, x = start; i < static_cast<int64_t>(length); ++i, x += step) items.push_back(Value::Int(x));
  return Value::PythonSequence(
      std::move(items), "range",
      step == 1 ? Cat("range(", start, ", ", stop, ")") : Cat("range(", start, ", ", stop, ", ", step, ")"));
}

// dict(*args, **kwargs): a mapping or pairs, then keywords.
absl::StatusOr<Dict> MakeDict(Renderer& r, const CallArgs& args, std::string_view function) {
  Dict out;
  if (args.positional.size() > 1) {
    return TypeError(Cat(function, " expected at most 1 argument, got ", args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.dict().entries()) JINJA_RETURN_IF_ERROR(out.Set(key, value));
    } else if (source.is_object() && source.object()->namespace_attributes() != nullptr) {
      for (const auto& [key, value] : source.object()->namespace_attributes()->entries()) {
        JINJA_RETURN_IF_ERROR(out.Set(key, value));
      }
    } else {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> pairs, r.Iterate(source));
      for (size_t i = 0; i < pairs.size(); ++i) {
        if (!pairs[i].is_list() && !pairs[i].is_string() && !pairs[i].is_dict()) {
          return TypeError(Cat("cannot convert dictionary update sequence element #", i, " to a sequence"));
        }
        JINJA_ASSIGN_OR_RETURN(std::vector<Value> pair, r.Iterate(pairs[i]));
        if (pair.size() != 2) {
          return ValueError(
              Cat("dictionary update sequence element #", i, " has length ", pair.size(), "; 2 is required"));
        }
        JINJA_RETURN_IF_ERROR(out.Set(pair[0], pair[1]));
      }
    }
  }
  for (const auto& [key, value] : args.keyword) JINJA_RETURN_IF_ERROR(out.Set(Value::String(key), value));
  return out;
}

absl::StatusOr<Value> Namespace(Renderer& r, CallArgs args) {
  JINJA_ASSIGN_OR_RETURN(Dict attributes, MakeDict(r, args, "namespace"));
  auto ns = std::make_shared<NamespaceObject>(std::move(attributes));
  r.Own(ns);
  return Value::FromObject(std::move(ns));
}

absl::StatusOr<Value> DictFunction(Renderer& r, CallArgs args) {
  JINJA_ASSIGN_OR_RETURN(Dict d, MakeDict(r, args, "dict"));
  return Value::FromDict(std::move(d));
}

absl::StatusOr<Value> Cycler(Renderer&, CallArgs args) {
  if (!args.keyword.empty()) return TypeError("Cycler() got an unexpected keyword argument");
  return Value::FromObject(std::make_shared<CyclerObject>(std::move(args.positional)));
}

absl::StatusOr<Value> Joiner(Renderer&, CallArgs args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("Joiner", args, {"sep"}));
  return Value::FromObject(std::make_shared<JoinerObject>(a.has(0) ? a[0] : Value::String(", ")));
}

absl::StatusOr<Value> RaiseException(Renderer&, CallArgs args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("raise_exception", args, {"message"}, 1));
  return TemplateFailure(kTemplateError, ToStr(a[0]));
}

absl::StatusOr<Value> StrftimeNow(Renderer& r, CallArgs args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("strftime_now", args, {"format"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string format, ToStringArg(a[0], "strftime() argument 1"));
  if (format.size() > 4096) return LimitExceeded("a strftime format over 4096 bytes");
  const absl::Time t = absl::FromCivil(r.Now(), absl::UTCTimeZone());
  return Value::String(absl::FormatTime(format, t, absl::UTCTimeZone()));
}

absl::StatusOr<Value> Lipsum(Renderer&, CallArgs) {
  return Unsupported("lipsum() (random text would make renders differ)");
}

}  // namespace

std::optional<Value> FindGlobal(std::string_view name) {
  using Fn = absl::StatusOr<Value> (*)(Renderer&, CallArgs);
  static constexpr std::pair<std::string_view, Fn> kGlobals[] = {
      {"range", Range},
      {"namespace", Namespace},
      {"dict", DictFunction},
      {"cycler", Cycler},
      {"joiner", Joiner},
      {"lipsum", Lipsum},
      {"raise_exception", RaiseException},
      {"strftime_now", StrftimeNow},
  };
  for (const auto& [global, fn] : kGlobals) {
    if (global == name) return MakeFunction(std::string(name), fn);
  }
  return std::nullopt;
}

}  // namespace cairn::jinja
