#include "chat/jinja/builtins.h"

#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

// Jinja2 defines these; cairn does not (random would make renders differ,
// urlize is for HTML pages).
constexpr std::string_view kUnsupportedFilters[] = {"random", "urlize"};

template <typename Entry, typename Fn>
const absl::flat_hash_map<std::string_view, Fn>& Index(std::initializer_list<std::span<const Entry>> tables) {
  auto* index = new absl::flat_hash_map<std::string_view, Fn>();
  for (const auto& table : tables) {
    for (const Entry& e : table) index->emplace(e.name, e.fn);
  }
  return *index;
}

const absl::flat_hash_map<std::string_view, FilterFn>& Filters() {
  static const auto& index = Index<NamedFilter, FilterFn>({TextFilters(), SequenceFilters()});
  return index;
}

const absl::flat_hash_map<std::string_view, TestFn>& TestIndex() {
  static const auto& index = Index<NamedTest, TestFn>({Tests()});
  return index;
}

}  // namespace

FilterFn FindFilter(std::string_view name) {
  auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

TestFn FindTest(std::string_view name) {
  auto it = TestIndex().find(name);
  return it == TestIndex().end() ? nullptr : it->second;
}

absl::Status CheckFilterName(std::string_view name) {
  if (FindFilter(name) != nullptr) return absl::OkStatus();
  for (std::string_view unsupported : kUnsupportedFilters) {
    if (name == unsupported) return Unsupported(Cat("the filter '", name, "'"));
  }
  return TemplateFailure(kAssertionError, Cat("No filter named '", name, "'."));
}

absl::Status CheckTestName(std::string_view name) {
  if (FindTest(name) != nullptr) return absl::OkStatus();
  return TemplateFailure(kAssertionError, Cat("No test named '", name, "'."));
}

absl::Status UndefinedFailure(const Value& v) {
  return TemplateFailure(v.undefined_security() ? kSecurityError : kUndefinedError, v.undefined_message());
}

absl::StatusOr<BoundArgs> Bind(std::string_view function, const CallArgs& args,
                               std::initializer_list<std::string_view> names, size_t required, bool star) {
  BoundArgs out;
  out.values_.resize(names.size());
  out.given_.assign(names.size(), false);
  const std::vector<std::string_view> params(names);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      out.values_[i] = args.positional[i];
      out.given_[i] = true;
    } else if (star) {
      out.rest.push_back(args.positional[i]);
    } else {
      return TypeError(Cat(function, "() takes ", required == params.size() ? "" : "at most ", params.size(),
                           " positional argument", params.size() == 1 ? "" : "s", " but ", args.positional.size(),
                           " were given"));
    }
  }
  for (const auto& [key, value] : args.keyword) {
    auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) {
      if (star) {
        out.rest_keywords.emplace_back(key, value);
        continue;
      }
      return TypeError(Cat(function, "() got an unexpected keyword argument '", key, "'"));
    }
    const size_t i = static_cast<size_t>(it - params.begin());
    if (out.given_[i]) return TypeError(Cat(function, "() got multiple values for argument '", key, "'"));
    out.values_[i] = value;
    out.given_[i] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!out.given_[i]) {
      return TypeError(Cat(function, "() missing 1 required positional argument: '", params[i], "'"));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ToInt(const Value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.i();
  if (v.is_undefined()) return UndefinedFailure(v);
  return TypeError(Cat("'", PyTypeName(v), "' object cannot be interpreted as an integer (", what, ")"));
}

absl::StatusOr<std::string> ToStringArg(const Value& v, std::string_view what) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return UndefinedFailure(v);
  return TypeError(Cat(what, " must be str, not ", PyTypeName(v)));
}

bool HasClient(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
      return v.text().has_client();
    case ValueKind::kList:
      for (const Value& item : v.items()) {
        if (HasClient(item)) return true;
      }
      return false;
    case ValueKind::kDict:
      for (const auto& [key, value] : v.dict().entries()) {
        if (HasClient(key) || HasClient(value)) return true;
      }
      return false;
    default:
      return v.client();
  }
}

Value Derived(std::string bytes, std::initializer_list<const Value*> inputs, bool markup) {
  bool client = false;
  for (const Value* in : inputs) client = client || (in != nullptr && HasClient(*in));
  Text text(std::move(bytes), client);
  return markup ? Value::Markup(std::move(text)) : Value::String(std::move(text));
}

}  // namespace cairn::jinja
