#include "chat/output/output_format.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace cairn::chat::output {
namespace {

TEST(OutputFormatTest, NamesAreUniqueAndRoundTrip) {
  std::set<std::string> names;
  for (OutputFormat format : AllOutputFormats()) {
    const std::string name(OutputFormatName(format));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(OutputFormatFromName(name), format) << name;
  }
  EXPECT_EQ(names.size(), 19u);
  EXPECT_EQ(OutputFormatFromName("qwen-xml"), OutputFormat::kQwenXml);
  EXPECT_FALSE(OutputFormatFromName("Qwen-XML").has_value());
  EXPECT_FALSE(OutputFormatFromName("").has_value());
}

}  // namespace
}  // namespace cairn::chat::output
