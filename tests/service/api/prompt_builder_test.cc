// Prompt building on its own, with the real tokenizers and chat templates of
// the demo models: parts and messages to history items, BOS and message
// boundaries, control tokens kept out of client text, and the checks.
#include "service/api/prompt_builder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/model/tokenizer.h"
#include "gtest/gtest.h"
#include "service/api/status.h"
#include "tests/service/testing/demo_registry.h"

namespace cairn::service {
namespace {

class PromptBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = testing::LoadDemoModels({"tf=demo-transformer", "chat=demo-chat"});
    ASSERT_NE(models_, nullptr);
    tf_ = *models_->Find("tf");
    chat_ = *models_->Find("chat");
  }
  std::vector<TokenId> Tokenized(const ServedModel& m, const std::string& text) const {
    TokenizeOptions opt;
    opt.add_special = false;
    opt.parse_special = false;
    return m.tokenizer->Tokenize(text, opt);
  }
  TokenId Bos(const ServedModel& m) const { return m.tokenizer->special_tokens().bos; }
  // The id of a control token (parsed as special, as templates are).
  TokenId Control(const ServedModel& m, const std::string& text) const {
    const std::vector<TokenId> ids = m.tokenizer->Tokenize(text, {.add_special = false, .parse_special = true});
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
  }

  std::unique_ptr<ModelRegistry> models_;
  ServedModel* tf_ = nullptr;
  ServedModel* chat_ = nullptr;
  ServiceLimits limits_;
};

TEST_F(PromptBuilderTest, PartsBecomeTokensWithABosOnlyAtTheStart) {
  v1::GenerateRequest req;
  req.add_parts()->set_text("the dog ran");
  req.add_parts()->set_message_boundary(true);
  req.add_parts()->mutable_tokens()->add_ids(305);
  auto start = BuildPrompt(*tf_, limits_, req, /*at_start=*/true);
  ASSERT_TRUE(start.ok()) << start.status();
  std::vector<TokenId> want = {Bos(*tf_)};
  for (TokenId t : Tokenized(*tf_, "the dog ran")) want.push_back(t);
  const size_t text_end = want.size();
  want.push_back(305);
  EXPECT_EQ(start->Tokens(), want);
  EXPECT_EQ(start->message_ends, std::vector<size_t>{text_end});
  auto appended = BuildPrompt(*tf_, limits_, req, /*at_start=*/false);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->Tokens(), std::vector<TokenId>(want.begin() + 1, want.end()));
}

TEST_F(PromptBuilderTest, ControlTokenTextInAPartStaysText) {
  v1::GenerateRequest req;
  req.add_parts()->set_text("<|im_start|>system");
  auto h = BuildPrompt(*chat_, limits_, req, /*at_start=*/false);
  ASSERT_TRUE(h.ok()) << h.status();
  const TokenId im_start = Control(*chat_, "<|im_start|>");
  for (TokenId t : h->Tokens()) EXPECT_NE(t, im_start);
}

TEST_F(PromptBuilderTest, MessagesRenderWithTheTemplateAndEndAtBoundaries) {
  v1::GenerateRequest req;
  for (const auto& [role, content] : {std::pair{"system", "You tell stories."}, {"user", "Tell me a tale."}}) {
    v1::ChatMessage* m = req.add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  auto h = BuildPrompt(*chat_, limits_, req, /*at_start=*/true);
  ASSERT_TRUE(h.ok()) << h.status();
  const TokenId im_start = Control(*chat_, "<|im_start|>");
  const std::vector<TokenId> tokens = h->Tokens();
  // Boundaries where the second message starts and where the generation
  // prompt starts: each right before an <|im_start|>.
  ASSERT_EQ(h->message_ends.size(), 2u);
  for (size_t end : h->message_ends) {
    ASSERT_LT(end, tokens.size());
    EXPECT_EQ(tokens[end], im_start);
  }
  EXPECT_EQ(tokens.back(), Tokenized(*chat_, "\n").back());  // "<|im_start|>assistant\n" ends it
  // Without the generation prompt, the last message's boundary is the end.
  req.set_add_generation_prompt(false);
  auto no_gen = BuildPrompt(*chat_, limits_, req, /*at_start=*/true);
  ASSERT_TRUE(no_gen.ok()) << no_gen.status();
  EXPECT_LT(no_gen->size(), h->size());
  EXPECT_EQ(no_gen->message_ends.back(), no_gen->size());
}

TEST_F(PromptBuilderTest, BadInputGetsAPreciseError) {
  auto code = [&](const ServedModel& model, const v1::GenerateRequest& req) {
    return BuildPrompt(model, limits_, req, true).status().code();
  };
  v1::GenerateRequest both;
  both.add_parts()->set_text("a");
  both.add_messages()->set_content("b");
  EXPECT_EQ(code(*tf_, both), absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest empty_part;
  empty_part.add_parts();
  EXPECT_EQ(code(*tf_, empty_part), absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest out_of_vocab;
  out_of_vocab.add_parts()->mutable_tokens()->add_ids(tf_->info().n_vocab);
  const absl::Status st = BuildPrompt(*tf_, limits_, out_of_vocab, true).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("'tf'"), std::string::npos) << st;
  v1::GenerateRequest embeddings;
  auto* chunk = embeddings.add_parts()->mutable_embeddings();
  chunk->set_width(tf_->info().n_embd);
  chunk->set_nx(1);
  chunk->set_ny(1);
  for (int i = 0; i < tf_->info().n_embd; ++i) chunk->add_values(0.5f);
  EXPECT_EQ(code(*tf_, embeddings), absl::StatusCode::kInvalidArgument);  // demo-transformer takes none
  ServiceLimits small;
  small.max_prompt_parts = 2;
  small.max_text_bytes = 4;
  v1::GenerateRequest many;
  for (int i = 0; i < 3; ++i) many.add_parts()->mutable_tokens()->add_ids(300);
  EXPECT_TRUE(absl::IsInvalidArgument(BuildPrompt(*tf_, small, many, true).status()));
  v1::GenerateRequest long_text;
  long_text.add_parts()->set_text("a long text");
  EXPECT_TRUE(absl::IsInvalidArgument(BuildPrompt(*tf_, small, long_text, true).status()));
  v1::GenerateRequest long_messages;
  long_messages.add_messages()->set_content("a long message");
  EXPECT_TRUE(absl::IsInvalidArgument(BuildPrompt(*chat_, small, long_messages, true).status()));
}

// The text bound is on all the parts together (as on all the messages):
// many parts each under it are refused before any is tokenized.
TEST_F(PromptBuilderTest, TextBoundIsOnAllThePartsTogether) {
  ServiceLimits small;
  small.max_text_bytes = 16;
  v1::GenerateRequest split;
  for (int i = 0; i < 3; ++i) split.add_parts()->set_text("the dog ");  // 8 bytes each, 24 in all
  const absl::Status st = BuildPrompt(*tf_, small, split, true).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_NE(st.message().find("text parts longer than 16 bytes"), std::string::npos) << st;
  split.mutable_parts()->RemoveLast();
  EXPECT_TRUE(BuildPrompt(*tf_, small, split, true).ok());
}

// A prompt with at least the context's tokens is refused as the context
// being exceeded as soon as they are counted, whether they come as ids,
// text or rendered messages: a client cannot make the server keep millions
// of tokens (tens of bytes each) only to refuse them. One token fewer is a
// prompt.
TEST_F(PromptBuilderTest, APromptBeyondTheContextIsRefusedBeforeItIsKept) {
  const auto context = static_cast<int>(tf_->context_length());
  v1::GenerateRequest one_part;
  auto* part = one_part.add_parts()->mutable_tokens();
  for (int i = 0; i + 1 < context; ++i) part->add_ids(300);
  EXPECT_TRUE(BuildPrompt(*tf_, limits_, one_part, true).ok());
  part->add_ids(300);
  absl::Status st = BuildPrompt(*tf_, limits_, one_part, true).status();
  EXPECT_TRUE(IsContextLengthExceeded(st)) << st;
  EXPECT_NE(st.message().find(absl::StrCat("prompt of ", context, " positions does not fit the context of ", context)),
            std::string::npos)
      << st;
  for (int i = 0; i < 1000; ++i) part->add_ids(300);
  st = BuildPrompt(*tf_, limits_, one_part, true).status();
  EXPECT_TRUE(IsContextLengthExceeded(st)) << st;
  EXPECT_NE(st.message().find(absl::StrCat("more than ", context, " positions")), std::string::npos) << st;

  std::string words;
  while (Tokenized(*tf_, words).size() <= static_cast<size_t>(context)) words += "the dog ran ";
  v1::GenerateRequest text;
  text.add_parts()->set_text(words);
  st = BuildPrompt(*tf_, limits_, text, true).status();
  EXPECT_TRUE(IsContextLengthExceeded(st)) << st;

  v1::GenerateRequest messages;
  messages.add_messages()->set_role("user");
  messages.mutable_messages(0)->set_content(words);
  st = BuildPrompt(*chat_, limits_, messages, true).status();
  EXPECT_TRUE(IsContextLengthExceeded(st)) << st;
}

}  // namespace
}  // namespace cairn::service
