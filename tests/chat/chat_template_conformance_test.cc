// Conformance of ChatTemplate (and its Jinja interpreter) with Hugging Face
// transformers' apply_chat_template: every template x case of
// ../shared/chat_templates renders byte for byte the reference's text, or is
// refused with the reference's message. Prints the table (templates x
// cases: '.' identical, 'r' refused alike, 'X' different).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A case of cases.json as a request: messages, tools, template arguments.
ChatRequest RequestOf(const Json& c) {
  ChatRequest request;
  for (const Json& m : c["messages"]) {
    ChatMessage message(m["role"].get<std::string>(), std::nullopt);
    if (m.contains("content") && m["content"].is_string()) message.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content")) message.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_call_id")) message.tool_call_id = m["tool_call_id"].get<std::string>();
    if (m.contains("name")) message.name = m["name"].get<std::string>();
    if (m.contains("tool_calls")) {
      for (const Json& call : m["tool_calls"]) {
        const Json& f = call["function"];
        message.tool_calls.push_back(
            {call["id"].get<std::string>(), f["name"].get<std::string>(), f["arguments"].dump()});
      }
    }
    request.messages.push_back(std::move(message));
  }
  request.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  if (c.contains("tools")) request.tools = c["tools"].dump();
  Json arguments = Json::object();
  for (const auto& [key, value] : c.items()) {
    if (key != "case" && key != "messages" && key != "add_generation_prompt" && key != "tools") arguments[key] = value;
  }
  if (!arguments.empty()) request.template_arguments = arguments.dump();
  return request;
}

struct Reference {
  std::string text;
  std::string error;  // set when the reference refused
};

class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SharedPath("chat_templates");
    cases_ = Json::parse(ReadFile(dir_ + "/cases.json"));
    options_.now = [] { return absl::CivilSecond(2026, 1, 15, 12, 0, 0); };  // cases.json's "now"
    tokens_ = {cases_["bos_token"].get<std::string>(), cases_["eos_token"].get<std::string>()};
    for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/templates")) {
      templates_.push_back(entry.path().stem().string());
    }
    std::sort(templates_.begin(), templates_.end());
  }

  std::vector<Reference> Expected(const std::string& name) const {
    std::vector<Reference> out;
    std::ifstream in(dir_ + "/expected/" + name + ".jsonl");
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line);
      out.push_back({j.value("text", ""), j.value("error", "")});
    }
    return out;
  }

  absl::StatusOr<ChatTemplate> Load(const std::string& name) const {
    return ChatTemplate::FromSource(ReadFile(dir_ + "/templates/" + name + ".jinja"), "file:" + name, tokens_,
                                    options_);
  }

  std::string dir_;
  Json cases_;
  ChatTemplateOptions options_;
  ChatSpecialTokens tokens_;
  std::vector<std::string> templates_;
};

TEST_F(ConformanceTest, EveryTemplateAndCaseRendersAsTransformers) {
  CAIRN_REQUIRE_SHARED("chat_templates/cases.json");
  ASSERT_EQ(templates_.size(), 45u);
  int identical = 0, refused = 0, different = 0;
  std::ostringstream table;
  for (const std::string& name : templates_) {
    const std::vector<Reference> expected = Expected(name);
    ASSERT_EQ(expected.size(), cases_["cases"].size()) << name;
    auto tmpl = Load(name);
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.status();
    std::string row;
    for (size_t i = 0; i < expected.size(); ++i) {
      const Json& c = cases_["cases"][i];
      auto rendered = tmpl->Render(RequestOf(c));
      const Reference& ref = expected[i];
      if (ref.error.empty() && rendered.ok() && rendered->Text() == ref.text) {
        ++identical, row += '.';
      } else if (!ref.error.empty() && !rendered.ok()) {
        ++refused, row += 'r';
        EXPECT_EQ(rendered.status().message(), ref.error) << name << " / " << c["case"];
        EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument) << name;
      } else {
        ++different, row += 'X';
        ADD_FAILURE() << name << " / " << c["case"] << ": expected "
                      << (ref.error.empty() ? "text:\n" + ref.text : "refusal: " + ref.error) << "\ngot "
                      << (rendered.ok() ? "text:\n" + rendered->Text() : rendered.status().ToString());
      }
    }
    table << "  " << name << std::string(name.size() < 48 ? 48 - name.size() : 1, ' ') << row << "\n";
  }
  std::cout << "templates x cases ('.' identical, 'r' refused alike, 'X' different):\n"
            << table.str() << "identical " << identical << ", refused alike " << refused << ", different " << different
            << " (of " << templates_.size() * cases_["cases"].size() << ")\n";
  EXPECT_EQ(different, 0);
}

// Where each message's rendering starts, on every template and case: the
// starts are ordered part boundaries before the generation prompt, and in
// templates with a turn opener a message the template's loop renders
// starts at its turn's opener (or, merged into the turn before, at what it
// writes first).
TEST_F(ConformanceTest, MessageStartsLandOnTurns) {
  CAIRN_REQUIRE_SHARED("chat_templates/cases.json");
  const std::vector<std::string> openers = {"<|im_start|>", "<|start_header_id|>", "<start_of_turn>",
                                            "<|start|>",    "<|start_of_role|>",   "<|START_OF_TURN_TOKEN|>"};
  int checked = 0;
  for (const std::string& name : templates_) {
    const std::string source = ReadFile(dir_ + "/templates/" + name + ".jinja");
    std::string opener;
    for (const std::string& o : openers) {
      if (opener.empty() && source.find(o) != std::string::npos) opener = o;
    }
    auto tmpl = Load(name);
    ASSERT_TRUE(tmpl.ok()) << name;
    for (const Json& c : cases_["cases"]) {
      auto r = tmpl->Render(RequestOf(c));
      if (!r.ok()) continue;
      const std::string text = r->Text();
      const std::vector<size_t>& starts = r->message_starts;
      ASSERT_EQ(starts.size(), c["messages"].size()) << name;
      std::vector<size_t> boundaries = {0};
      for (const auto& part : r->parts) boundaries.push_back(boundaries.back() + part.text.size());
      for (size_t i = 0; i < starts.size(); ++i) {
        const std::string where = name + " / " + c["case"].get<std::string>() + " / message " + std::to_string(i);
        EXPECT_LE(starts[i], i + 1 < starts.size() ? starts[i + 1] : r->generation_prompt_start) << where;
        EXPECT_TRUE(std::find(boundaries.begin(), boundaries.end(), starts[i]) != boundaries.end()) << where;
        const size_t next = i + 1 < starts.size() ? starts[i + 1] : r->generation_prompt_start;
        if (opener.empty() || starts[i] == next) continue;  // merged into the next one's rendering
        const std::string role = c["messages"][i]["role"];
        const bool at_opener = text.compare(starts[i], opener.size(), opener) == 0;
        EXPECT_TRUE(at_opener ||
                    ((role == "tool" || role == "assistant") && text[starts[i]] != ' ' && text[starts[i]] != '\n'))
            << where << " starts at: " << text.substr(starts[i], 40);
        ++checked;
      }
      EXPECT_LE(r->generation_prompt_start, text.size()) << name;
    }
  }
  EXPECT_GT(checked, 300);
}

TEST_F(ConformanceTest, MessageStartsOfQwen3AndGptOssAgentLoops) {
  CAIRN_REQUIRE_SHARED("chat_templates/cases.json");
  const Json* agent = nullptr;
  for (const Json& c : cases_["cases"]) {
    if (c["case"] == "agent_loop") agent = &c;
  }
  ASSERT_NE(agent, nullptr);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      // The system message is written before the loop: it starts with the
      // first user message.
      {"Qwen-Qwen3-0.6B",
       {"<|im_start|>user\nFind", "<|im_start|>user\nFind", "<|im_start|>assistant\nLet me",
        "<|im_start|>user\n<tool_response>", "<|im_start|>assistant\nIt is", "<|im_start|>user\nShow"}},
      {"openai-gpt-oss-120b",
       {"<|start|>user<|message|>Find", "<|start|>user<|message|>Find", "<|start|>assistant to=functions",
        "<|start|>functions.search_files", "<|start|>assistant<|channel|>", "<|start|>user<|message|>Show"}},
  };
  for (const auto& [name, heads] : expected) {
    auto tmpl = Load(name);
    ASSERT_TRUE(tmpl.ok()) << name;
    auto r = tmpl->Render(RequestOf(*agent));
    ASSERT_TRUE(r.ok()) << r.status();
    const std::string text = r->Text();
    ASSERT_EQ(r->message_starts.size(), heads.size());
    for (size_t i = 0; i < heads.size(); ++i) {
      EXPECT_EQ(text.substr(r->message_starts[i], heads[i].size()), heads[i]) << name << " message " << i;
    }
    EXPECT_EQ(text.substr(r->generation_prompt_start),
              name == "openai-gpt-oss-120b" ? "<|start|>assistant" : "<|im_start|>assistant\n");
  }
}

}  // namespace
}  // namespace cairn
