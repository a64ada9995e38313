// Tests of chat/jinja/error.cc: error kinds, codes and lines.
#include "chat/jinja/error.h"

#include "chat/jinja/template.h"
#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(ErrorTest, LinesTravelAsPayload) {
  absl::Status st = WithLine(TemplateFailure(kTemplateError, "System role not supported"), 12);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "TemplateError: System role not supported");
  EXPECT_EQ(ErrorLine(st), 12);
  EXPECT_EQ(ErrorLine(WithLine(st, 3)), 12);  // the innermost line stays
  EXPECT_EQ(DescribeError(st), "TemplateError: System role not supported (template line 12)");
  EXPECT_EQ(ErrorLine(absl::InternalError("x")), 0);
  EXPECT_EQ(Unsupported("x").code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(LimitExceeded("x").code(), absl::StatusCode::kResourceExhausted);
}

TEST(ErrorTest, TemplateErrorsCarryTheirLine) {
  auto syntax = Template::Create("line 1\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(ErrorLine(syntax.status()), 3);
  auto tmpl = Template::Create("a\nb\n{% if true %}\n  {{ raise_exception('no') }}\n{% endif %}");
  ASSERT_TRUE(tmpl.ok());
  auto out = (*tmpl)->Render(RenderInput());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "TemplateError: no");
  EXPECT_EQ(ErrorLine(out.status()), 4);
}

}  // namespace
}  // namespace cairn::jinja
