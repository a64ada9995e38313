// ../shared/chat_templates for the tests: a template's source and what it
// renders for a case (cases.json, expected/NAME.jsonl).
#ifndef CAIRN_TESTS_CHAT_OUTPUT_SHARED_TEMPLATES_H_
#define CAIRN_TESTS_CHAT_OUTPUT_SHARED_TEMPLATES_H_

#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/testing/shared_data.h"

namespace cairn::chat::output::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// The source of templates/NAME.jinja.
inline std::string TemplateSource(const std::string& name) {
  return ReadFile(::cairn::testing::SharedPath("chat_templates/templates/" + name + ".jinja"));
}

// What template NAME renders for case_name; empty when it refuses the case
// (or the case is unknown).
inline std::string Rendering(const std::string& name, const std::string& case_name) {
  std::ifstream lines(::cairn::testing::SharedPath("chat_templates/expected/" + name + ".jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json c = nlohmann::json::parse(line);
    if (c.at("case") == case_name) return c.value("text", "");
  }
  return "";
}

}  // namespace cairn::chat::output::testing

#endif  // CAIRN_TESTS_CHAT_OUTPUT_SHARED_TEMPLATES_H_
