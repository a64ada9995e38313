#include "chat/jinja/template.h"

#include "chat/jinja/fold.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"

namespace cairn::jinja {

struct Template::Tree {
  Body body;
};

Template::Template(std::unique_ptr<Tree> tree) : tree_(std::move(tree)) {}
Template::~Template() = default;

absl::StatusOr<std::shared_ptr<const Template>> Template::Create(std::string_view source) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  auto tree = std::make_unique<Tree>();
  JINJA_ASSIGN_OR_RETURN(tree->body, Parse(std::move(tokens)));
  FoldConstants(tree->body);
  return std::shared_ptr<const Template>(new Template(std::move(tree)));
}

absl::StatusOr<Text> Template::Render(const RenderInput& input) const { return Render(input, nullptr); }

absl::StatusOr<Text> Template::Render(const RenderInput& input, std::vector<size_t>* write_offsets) const {
  Renderer renderer(input);
  return renderer.Run(tree_->body, write_offsets);
}

}  // namespace cairn::jinja
