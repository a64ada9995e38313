// The tokenizer of a model file under ../shared, for tests.
#ifndef CAIRN_TESTS_TESTING_SHARED_TOKENIZER_H_
#define CAIRN_TESTS_TESTING_SHARED_TOKENIZER_H_

#include <memory>
#include <string>

#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn::testing {

// The tokenizer of ../shared/`relative`; nullptr (with a test failure) when
// the file or its tokenizer does not load.
inline std::unique_ptr<Tokenizer> LoadSharedTokenizer(const std::string& relative) {
  auto model = ModelFile::Open(SharedPath(relative));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto tok = Tokenizer::Create(**model);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_SHARED_TOKENIZER_H_
