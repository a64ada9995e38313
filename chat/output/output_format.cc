#include "chat/output/output_format.h"

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::chat::output {
namespace {

constexpr std::pair<OutputFormat, std::string_view> kNames[] = {
    {OutputFormat::kNone, "none"},
    {OutputFormat::kThink, "think"},
    {OutputFormat::kHermes, "hermes"},
    {OutputFormat::kQwenXml, "qwen-xml"},
    {OutputFormat::kLlama3, "llama3"},
    {OutputFormat::kHarmony, "harmony"},
    {OutputFormat::kNemotron, "nemotron"},
    {OutputFormat::kGranite, "granite"},
    {OutputFormat::kLfm2, "lfm2"},
    {OutputFormat::kDeepSeek, "deepseek"},
    {OutputFormat::kKimiK2, "kimi-k2"},
    {OutputFormat::kMistral, "mistral"},
    {OutputFormat::kFunctionary, "functionary"},
    {OutputFormat::kGlm, "glm"},
    {OutputFormat::kApriel, "apriel"},
    {OutputFormat::kCohere, "cohere"},
    {OutputFormat::kMiniMax, "minimax-m2"},
    {OutputFormat::kDeepSeekV4, "deepseek-v4"},
    {OutputFormat::kGemma4, "gemma4"},
};

}  // namespace

const std::vector<OutputFormat>& AllOutputFormats() {
  static const std::vector<OutputFormat>* const formats = [] {
    auto* all = new std::vector<OutputFormat>();
    for (const auto& [format, name] : kNames) all->push_back(format);
    return all;
  }();
  return *formats;
}

std::string_view OutputFormatName(OutputFormat format) {
  for (const auto& [f, name] : kNames) {
    if (f == format) return name;
  }
  return "none";
}

std::optional<OutputFormat> OutputFormatFromName(std::string_view name) {
  for (const auto& [format, n] : kNames) {
    if (n == name) return format;
  }
  return std::nullopt;
}

}  // namespace cairn::chat::output
