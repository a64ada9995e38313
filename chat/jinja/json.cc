#include "chat/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

absl::StatusOr<Value> FromJsonAt(const nlohmann::ordered_json& json, bool client, int depth) {
  if (depth >= kMaxJsonDepth && (json.is_array() || json.is_object())) {
    return absl::InvalidArgumentError(Cat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>(), client);
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>(), client);
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Unsupported("a JSON integer beyond 64 bits");
      }
      return Value::Int(static_cast<int64_t>(u), client);
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>(), client);
    case nlohmann::ordered_json::value_t::string:
      return Value::String(json.get<std::string>(), client);
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        JINJA_ASSIGN_OR_RETURN(Value v, FromJsonAt(item, client, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) {
        JINJA_ASSIGN_OR_RETURN(Value v, FromJsonAt(item, client, depth + 1));
        JINJA_RETURN_IF_ERROR(dict.Set(Value::String(key, client), std::move(v)));
      }
      return Value::FromDict(std::move(dict));
    }
    default:
      return absl::InvalidArgumentError("JSON binary values have no template value");
  }
}

class JsonWriter {
 public:
  JsonWriter(const JsonOptions& options, size_t max_bytes) : options_(options), max_bytes_(max_bytes) {
    item_sep_ = options.item_separator.value_or(options.indent.has_value() ? "," : ", ");
    key_sep_ = options.key_separator.value_or(": ");
  }

  absl::Status Write(const Value& v, int level) {
    if (out_.size() > max_bytes_) return LimitExceeded(Cat("tojson output over ", max_bytes_, " bytes"));
    switch (v.kind()) {
      case ValueKind::kNone:
        out_.Append("null", false);
        return absl::OkStatus();
      case ValueKind::kBool:
        out_.Append(v.b() ? "true" : "false", v.client());
        return absl::OkStatus();
      case ValueKind::kInt:
        out_.Append(Cat(v.i()), v.client());
        return absl::OkStatus();
      case ValueKind::kFloat:
        out_.Append(FloatText(v.f()), v.client());
        return absl::OkStatus();
      case ValueKind::kString:
        return String(v);
      case ValueKind::kList:
        if (v.is_generator() || !v.list().python_type.empty()) break;  // range, dict views
        return Array(v.items(), level);
      case ValueKind::kDict:
        return Object(v.dict(), level);
      default:
        break;
    }
    return TypeError(Cat("Object of type ", v.markup() ? "Markup" : PyTypeName(v), " is not JSON serializable"));
  }

  Text Take() { return std::move(out_); }

 private:
  static std::string FloatText(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
    return PyFloatRepr(f);
  }

  absl::Status String(const Value& v) {
    out_.Append("\"", false);
    out_.Append(Escape(v.str()), v.text().has_client());
    out_.Append("\"", false);
    return absl::OkStatus();
  }

  std::string Escape(std::string_view s) const {
    std::string e;
    e.reserve(s.size());
    for (const PyChar& c : PyChars(s)) {
      const uint32_t cp = c.cp;
      switch (cp) {
        case '"':
          e += "\\\"";
          continue;
        case '\\':
          e += "\\\\";
          continue;
        case '\n':
          e += "\\n";
          continue;
        case '\r':
          e += "\\r";
          continue;
        case '\t':
          e += "\\t";
          continue;
        case '\b':
          e += "\\b";
          continue;
        case '\f':
          e += "\\f";
          continue;
        default:
          break;
      }
      if (cp < 0x20 || (options_.ensure_ascii && cp >= 0x7F)) {
        if (cp >= 0x10000) {
          const uint32_t v = cp - 0x10000;
          CatAppend(&e, "\\u", absl::Hex(0xD800 + (v >> 10), absl::kZeroPad4), "\\u",
                    absl::Hex(0xDC00 + (v & 0x3FF), absl::kZeroPad4));
        } else {
          CatAppend(&e, "\\u", absl::Hex(cp, absl::kZeroPad4));
        }
      } else {
        e.append(s.substr(c.offset, c.size));
      }
    }
    return e;
  }

  void Newline(int level) {
    if (!options_.indent.has_value()) return;
    out_.Append("\n", false);
    for (int i = 0; i < level; ++i) out_.Append(*options_.indent, false);
  }

  absl::Status Array(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_.Append("[]", false);
      return absl::OkStatus();
    }
    out_.Append("[", false);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_.Append(item_sep_, false);
      Newline(level + 1);
      JINJA_RETURN_IF_ERROR(Write(items[i], level + 1));
    }
    Newline(level);
    out_.Append("]", false);
    return absl::OkStatus();
  }

  // A key as json.dumps writes it (non-string keys converted).
  absl::StatusOr<Value> Key(const Value& key) {
    switch (key.kind()) {
      case ValueKind::kString:
        return key;
      case ValueKind::kNone:
        return Value::String("null");
      case ValueKind::kBool:
        return Value::String(key.b() ? "true" : "false", key.client());
      case ValueKind::kInt:
        return Value::String(Cat(key.i()), key.client());
      case ValueKind::kFloat:
        return Value::String(FloatText(key.f()), key.client());
      default:
        return TypeError(Cat("keys must be str, int, float, bool or None, not ", PyTypeName(key)));
    }
  }

  absl::Status Object(const Dict& dict, int level) {
    if (dict.empty()) {
      out_.Append("{}", false);
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : dict.entries()) entries.push_back(&e);
    if (options_.sort_keys) {
      absl::Status order = absl::OkStatus();
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        auto less = Compare(CompareOp::kLt, a->first, b->first);
        if (!less.ok()) order.Update(less.status());
        return less.ok() && *less;
      });
      JINJA_RETURN_IF_ERROR(order);
    }
    out_.Append("{", false);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_.Append(item_sep_, false);
      Newline(level + 1);
      JINJA_ASSIGN_OR_RETURN(Value key, Key(entries[i]->first));
      JINJA_RETURN_IF_ERROR(String(key));
      out_.Append(key_sep_, false);
      JINJA_RETURN_IF_ERROR(Write(entries[i]->second, level + 1));
    }
    Newline(level);
    out_.Append("}", false);
    return absl::OkStatus();
  }

  const JsonOptions& options_;
  size_t max_bytes_;
  std::string item_sep_;
  std::string key_sep_;
  Text out_;
};

}  // namespace

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, bool client) { return FromJsonAt(json, client, 0); }

absl::StatusOr<Text> ToJson(const Value& v, const JsonOptions& options, size_t max_bytes) {
  JsonWriter writer(options, max_bytes);
  JINJA_RETURN_IF_ERROR(writer.Write(v, 0));
  return writer.Take();
}

}  // namespace cairn::jinja
