// Helpers for the interpreter's tests: render a template over a fixed set
// of variables and compare with what Jinja2 3.1 (configured as transformers
// configures it) renders. The case tables' expected strings are Jinja2's own
// output for the same template and variables.
#ifndef CAIRN_TESTS_CHAT_JINJA_RENDER_TESTING_H_
#define CAIRN_TESTS_CHAT_JINJA_RENDER_TESTING_H_

#include <string>
#include <string_view>

#include "chat/jinja/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cairn::jinja::testing {

struct RenderCase {
  const char* source;
  // The output, or "ERR <Python exception>: <message>".
  const char* expected;
};

// messages (system, user, assistant with reasoning_content), d, s, n, f, e,
// none, tools: the variables the case tables were rendered with.
const nlohmann::ordered_json& TestVariables();

// The output of `source` over `variables` (client values), or "ERR " and
// the error message (without its line). strftime_now reads 2026-01-15
// 12:00:00.
std::string RenderForTest(std::string_view source, const nlohmann::ordered_json& variables = TestVariables(),
                          const Limits& limits = Limits());

// Every case renders as Jinja2 did.
template <size_t N>
void ExpectRenders(const RenderCase (&cases)[N]) {
  for (const RenderCase& c : cases) EXPECT_EQ(RenderForTest(c.source), c.expected) << "template: " << c.source;
}

}  // namespace cairn::jinja::testing

#endif  // CAIRN_TESTS_CHAT_JINJA_RENDER_TESTING_H_
