// Jinja2's sequence and mapping filters (filters.py). Those that are
// generators in Jinja2 (map, select, reject, selectattr, rejectattr, unique,
// items, batch, slice, reverse of a list) return generators here too: one
// pass, not JSON serializable.
#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

using Args = CallArgs;

// make_attrgetter: "a.b.0" looked up part by part, items first.
class AttrGetter {
 public:
  AttrGetter() = default;
  explicit AttrGetter(const Value& attribute) {
    if (attribute.is_string()) {
      for (const std::string& part : PySplit(attribute.str(), std::string("."), -1)) {
        const bool digits =
            !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        int64_t index = 0;
        if (digits && absl::SimpleAtoi(part, &index)) {
          parts_.push_back(Value::Int(index));
        } else {
          parts_.push_back(Value::String(part));
        }
      }
    } else if (!attribute.is_none() && !attribute.is_undefined()) {
      parts_.push_back(attribute);
    }
  }
  absl::StatusOr<Value> Get(Renderer& r, Value item, const Value* fallback = nullptr) const {
    for (const Value& part : parts_) {
      JINJA_ASSIGN_OR_RETURN(item, GetItem(r, item, part));
      if (fallback != nullptr && item.is_undefined()) item = *fallback;
    }
    return item;
  }

 private:
  std::vector<Value> parts_;
};

// Jinja2's generator filters read their input only when consumed, so an
// input they cannot iterate fails then: the failure travels in the
// generator (limits still stop the render at once).
absl::StatusOr<Value> Deferred(absl::Status error) {
  if (error.code() != absl::StatusCode::kInvalidArgument) return error;
  return Value::Generator({}, std::move(error));
}

// ignore_case: strings lowercased for comparison.
Value IgnoreCase(const Value& v) { return v.is_string() ? Value::String(PyLower(v.str())) : v; }

// Python's sorted(values, key=keys[i]) (stable): TypeError for keys Python
// cannot order.
absl::Status SortByKeys(std::vector<Value>* values, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(values->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status status = absl::OkStatus();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto less = Compare(CompareOp::kLt, keys[reverse ? b : a], keys[reverse ? a : b]);
    if (!less.ok()) status.Update(less.status());
    return less.ok() && *less;
  });
  JINJA_RETURN_IF_ERROR(status);
  std::vector<Value> sorted;
  sorted.reserve(values->size());
  for (size_t i : order) sorted.push_back((*values)[i]);
  *values = std::move(sorted);
  return absl::OkStatus();
}

absl::StatusOr<Value> Default(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_default", args, {"default_value", "boolean"}));
  const Value fallback = a.has(0) ? a[0] : Value::String("");
  if (input.is_undefined() || (Truthy(a[1]) && !Truthy(input))) return fallback;
  return input;
}

absl::StatusOr<Value> Length(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("len", args, {}).status());
  switch (input.kind()) {
    case ValueKind::kUndefined:
      return Value::Int(0);
    case ValueKind::kString:
      return Value::Int(static_cast<int64_t>(PyLength(input.str())));
    case ValueKind::kDict:
      return Value::Int(static_cast<int64_t>(input.dict().size()));
    case ValueKind::kList:
      if (!input.is_generator()) return Value::Int(static_cast<int64_t>(input.items().size()));
      break;
    case ValueKind::kObject:
      if (const Dict* attrs = input.object()->namespace_attributes(); attrs != nullptr) break;
      if (input.object()->type_name() == "LoopContext") {
        auto length = input.object()->GetAttr("length");
        if (length.ok()) return *length;
      }
      break;
    default:
      break;
  }
  return TypeError(Cat("object of type '", PyTypeName(input), "' has no len()"));
}

absl::StatusOr<Value> List(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("list", args, {}).status());
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> First(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_first", args, {}).status());
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> Last(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_last", args, {}).status());
  if (input.is_generator()) return TypeError("'generator' object is not reversible");
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> Join(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_join", args, {"d", "attribute"}));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  const AttrGetter getter(a[1]);
  const Text separator = a.has(0) ? ToText(a[0]) : Text();
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(Value item, getter.Get(r, items[i]));
    if (i > 0) out.Append(separator);
    out.Append(ToText(item));
    if (out.size() > r.OutputLimit()) return LimitExceeded("a joined string larger than the output limit");
  }
  JINJA_RETURN_IF_ERROR(r.Charge(out.size()));
  return Value::String(std::move(out));
}

// map(filter, *args) or map(attribute=..., default=...).
absl::StatusOr<Value> Map(Renderer& r, const Value& input, Args& args) {
  std::vector<Value> out;
  if (!Truthy(input)) return Value::Generator(std::move(out), absl::OkStatus());
  auto iterated = r.Iterate(input);
  if (!iterated.ok()) return Deferred(iterated.status());
  std::vector<Value> items = *std::move(iterated);
  const auto attribute =
      std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& kw) { return kw.first == "attribute"; });
  absl::Status error;
  if (args.positional.empty() && attribute != args.keyword.end()) {
    std::optional<Value> fallback;
    for (const auto& [key, value] : args.keyword) {
      if (key == "default") {
        fallback = value;
      } else if (key != "attribute") {
        return TemplateFailure("FilterArgumentError", Cat("Unexpected keyword argument '", key, "'"));
      }
    }
    const AttrGetter getter(attribute->second);
    for (const Value& item : items) {
      auto v = getter.Get(r, item, fallback.has_value() ? &*fallback : nullptr);
      if (!v.ok()) {
        error = v.status();
        break;
      }
      out.push_back(*std::move(v));
    }
    return Value::Generator(std::move(out), std::move(error));
  }
  if (args.positional.empty()) return TemplateFailure("FilterArgumentError", "map requires a filter argument");
  const std::string name = ToStr(args.positional[0]);
  CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value& item : items) {
    auto v = r.ApplyFilter(name, item, rest);
    if (!v.ok()) {
      error = v.status();
      break;
    }
    out.push_back(*std::move(v));
  }
  return Value::Generator(std::move(out), std::move(error));
}

// select / reject / selectattr / rejectattr.
template <bool kSelect, bool kAttr>
absl::StatusOr<Value> SelectOrReject(Renderer& r, const Value& input, Args& args) {
  std::vector<Value> out;
  if (!Truthy(input)) return Value::Generator(std::move(out), absl::OkStatus());
  auto iterated = r.Iterate(input);
  if (!iterated.ok()) return Deferred(iterated.status());
  std::vector<Value> items = *std::move(iterated);
  size_t offset = 0;
  AttrGetter getter;
  if (kAttr) {
    if (args.positional.empty()) return TemplateFailure("FilterArgumentError", "Missing parameter for attribute name");
    getter = AttrGetter(args.positional[0]);
    offset = 1;
  }
  const bool has_test = args.positional.size() > offset;
  const std::string test = has_test ? ToStr(args.positional[offset]) : "";
  CallArgs rest{
      has_test ? std::vector<Value>(args.positional.begin() + offset + 1, args.positional.end()) : std::vector<Value>(),
      args.keyword};
  absl::Status error;
  for (const Value& item : items) {
    auto subject = getter.Get(r, item);
    absl::StatusOr<bool> pass = subject.ok() ? (has_test ? r.ApplyTest(test, *subject, rest) : Truthy(*subject))
                                             : absl::StatusOr<bool>(subject.status());
    if (!pass.ok()) {
      error = pass.status();
      break;
    }
    if (*pass == kSelect) out.push_back(item);
  }
  return Value::Generator(std::move(out), std::move(error));
}

absl::StatusOr<Value> Items(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_items", args, {}).status());
  std::vector<Value> out;
  if (input.is_undefined()) return Value::Generator(std::move(out), absl::OkStatus());
  // A generator: the error comes when it is consumed.
  if (!input.is_dict()) return Deferred(TypeError("Can only get item pairs from a mapping."));
  JINJA_RETURN_IF_ERROR(r.Charge(input.dict().size() * 2 * sizeof(Value)));
  for (const auto& [key, value] : input.dict().entries()) out.push_back(Value::List({key, value}, ListKind::kTuple));
  return Value::Generator(std::move(out), absl::OkStatus());
}

absl::StatusOr<Value> DictSort(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (input.is_undefined()) return UndefinedFailure(input);
  if (!input.is_dict())
    return TemplateFailure("AttributeError", Cat("'", PyTypeName(input), "' object has no attribute 'items'"));
  const std::string by = a.has(1) ? ToStr(a[1]) : "key";
  if (by != "key" && by != "value")
    return TemplateFailure("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  std::vector<Value> pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : input.dict().entries()) {
    pairs.push_back(Value::List({key, value}, ListKind::kTuple));
    const Value& k = by == "key" ? key : value;
    keys.push_back(Truthy(a[0]) ? k : IgnoreCase(k));
  }
  JINJA_RETURN_IF_ERROR(SortByKeys(&pairs, keys, Truthy(a[2])));
  return Value::List(std::move(pairs));
}

// Keys of `items` for sort / unique / min / max: the attribute(s), case
// folded unless case_sensitive.
absl::StatusOr<std::vector<Value>> SortKeys(Renderer& r, const std::vector<Value>& items, const Value& attribute,
                                            bool case_sensitive, bool multi) {
  std::vector<AttrGetter> getters;
  if (multi && attribute.is_string()) {
    for (const std::string& part : PySplit(attribute.str(), std::string(","), -1)) {
      getters.emplace_back(Value::String(part));
    }
  } else {
    getters.emplace_back(attribute);
  }
  std::vector<Value> keys;
  for (const Value& item : items) {
    std::vector<Value> parts;
    for (const AttrGetter& g : getters) {
      JINJA_ASSIGN_OR_RETURN(Value v, g.Get(r, item));
      parts.push_back(case_sensitive ? v : IgnoreCase(v));
    }
    keys.push_back(multi ? Value::List(std::move(parts)) : parts[0]);
  }
  return keys;
}

absl::StatusOr<Value> Sort(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_sort", args, {"reverse", "case_sensitive", "attribute"}));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, a[2], Truthy(a[1]), true));
  JINJA_RETURN_IF_ERROR(SortByKeys(&items, keys, Truthy(a[0])));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> Unique(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_unique", args, {"case_sensitive", "attribute"}));
  auto iterated = r.Iterate(input);
  if (!iterated.ok()) return Deferred(iterated.status());
  std::vector<Value> items = *std::move(iterated);
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, a[1], Truthy(a[0]), false));
  Dict seen;
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); ++i) {
    JINJA_RETURN_IF_ERROR(HashKey(keys[i]).status());
    if (seen.Find(keys[i]) != nullptr) continue;
    JINJA_RETURN_IF_ERROR(seen.Set(keys[i], Value::None()));
    out.push_back(items[i]);
  }
  return Value::Generator(std::move(out), absl::OkStatus());
}

template <bool kMax>
absl::StatusOr<Value> MinMax(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind(kMax ? "do_max" : "do_min", args, {"case_sensitive", "attribute"}));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, a[1], Truthy(a[0]), false));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(bool better, Compare(kMax ? CompareOp::kGt : CompareOp::kLt, keys[i], keys[best]));
    if (better) best = i;
  }
  return items[best];
}

absl::StatusOr<Value> Sum(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_sum", args, {"attribute", "start"}));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  const AttrGetter getter(a[0]);
  Value total = a.has(1) ? a[1] : Value::Int(0);
  if (total.is_string()) return TypeError("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : items) {
    JINJA_ASSIGN_OR_RETURN(Value v, getter.Get(r, item));
    JINJA_ASSIGN_OR_RETURN(total, BinaryOperation(r, BinaryOp::kAdd, total, v));
  }
  return total;
}

absl::StatusOr<Value> Reverse(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_reverse", args, {}).status());
  if (input.is_string()) {
    std::string out;
    const std::vector<PyChar> chars = PyChars(input.str());
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(input.str(), it->offset, it->size);
    return Derived(std::move(out), {&input}, input.markup());
  }
  const bool generator = input.is_generator();
  auto iterated = r.Iterate(input);
  if (!iterated.ok() && iterated.status().code() == absl::StatusCode::kInvalidArgument) {
    return TemplateFailure("FilterArgumentError", "argument must be iterable");
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, std::move(iterated));
  std::reverse(items.begin(), items.end());
  // reversed() of a sequence is an iterator; a generator is listed first.
  if (generator) return Value::List(std::move(items));
  return Value::Generator(std::move(items), absl::OkStatus());
}

absl::StatusOr<Value> Batch(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_batch", args, {"linecount", "fill_with"}, 1));
  JINJA_ASSIGN_OR_RETURN(int64_t count, ToInt(a[0], "linecount"));
  auto iterated = r.Iterate(input);
  if (!iterated.ok()) return Deferred(iterated.status());
  std::vector<Value> items = *std::move(iterated);
  if (count <= 0) count = 1;
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); i += static_cast<size_t>(count)) {
    std::vector<Value> batch(items.begin() + i, items.begin() + std::min(items.size(), i + static_cast<size_t>(count)));
    if (a.has(1) && !a[1].is_none()) {
      while (batch.size() < static_cast<size_t>(count)) batch.push_back(a[1]);
    }
    out.push_back(Value::List(std::move(batch)));
  }
  return Value::Generator(std::move(out), absl::OkStatus());
}

absl::StatusOr<Value> Slice(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_slice", args, {"slices", "fill_with"}, 1));
  JINJA_ASSIGN_OR_RETURN(int64_t slices, ToInt(a[0], "slices"));
  auto iterated = r.Iterate(input);
  if (!iterated.ok()) return Deferred(iterated.status());
  std::vector<Value> seq = *std::move(iterated);
  if (slices <= 0) return TemplateFailure(kZeroDivisionError, "integer division or modulo by zero");
  if (slices > 1 << 20) return LimitExceeded("more than 2^20 slices");
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices;
  const int64_t extra = length % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t n = 0; n < slices; ++n) {
    const int64_t start = offset + n * per;
    if (n < extra) ++offset;
    const int64_t end = offset + (n + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (a.has(1) && !a[1].is_none() && n >= extra) part.push_back(a[1]);
    out.push_back(Value::List(std::move(part)));
  }
  return Value::Generator(std::move(out), absl::OkStatus());
}

absl::StatusOr<Value> GroupBy(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_groupby", args, {"attribute", "default", "case_sensitive"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
  const AttrGetter getter(a[0]);
  const Value* fallback = a.has(1) && !a[1].is_none() ? &a[1] : nullptr;
  std::vector<Value> keys;
  for (const Value& item : items) {
    JINJA_ASSIGN_OR_RETURN(Value k, getter.Get(r, item, fallback));
    keys.push_back(Truthy(a[2]) ? k : IgnoreCase(k));
  }
  std::vector<Value> sorted = items;
  JINJA_RETURN_IF_ERROR(SortByKeys(&sorted, keys, false));
  JINJA_RETURN_IF_ERROR(SortByKeys(&keys, std::vector<Value>(keys), false));
  std::vector<Value> out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    std::vector<Value> group;
    while (j < sorted.size() && Equals(keys[j], keys[i])) group.push_back(sorted[j++]);
    JINJA_ASSIGN_OR_RETURN(Value grouper, getter.Get(r, group[0], fallback));
    out.push_back(Value::List({Truthy(a[2]) ? keys[i] : grouper, Value::List(std::move(group))}, ListKind::kTuple));
    i = j;
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Attr(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_attr", args, {"name"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string name, ToStringArg(a[0], "attribute name"));
  if (input.is_dict()) {
    if (std::optional<Value> method = BindMethod(input, name)) return *method;
    return Value::Undefined(Cat("'dict object' has no attribute '", name, "'"));
  }
  return GetAttribute(r, input, name);
}

constexpr NamedFilter kSequenceFilters[] = {
    {"attr", Attr},
    {"batch", Batch},
    {"count", Length},
    {"d", Default},
    {"default", Default},
    {"dictsort", DictSort},
    {"first", First},
    {"groupby", GroupBy},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", Length},
    {"list", List},
    {"map", Map},
    {"max", MinMax<true>},
    {"min", MinMax<false>},
    {"reject", SelectOrReject<false, false>},
    {"rejectattr", SelectOrReject<false, true>},
    {"reverse", Reverse},
    {"select", SelectOrReject<true, false>},
    {"selectattr", SelectOrReject<true, true>},
    {"slice", Slice},
    {"sort", Sort},
    {"sum", Sum},
    {"unique", Unique},
};

}  // namespace

std::span<const NamedFilter> SequenceFilters() { return kSequenceFilters; }

}  // namespace cairn::jinja
