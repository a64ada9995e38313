// cairn's Jinja interpreter: a template parsed once, rendered any number of
// times. It reproduces Jinja2 3.1 as Hugging Face transformers configures it
// for chat templates: ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loop controls (break, continue), the `{% generation %}`
// tag, a `tojson` with Python json.dumps semantics (ensure_ascii off,
// indent, separators, sort_keys), and the globals raise_exception(msg) and
// strftime_now(format).
//
// Supported: every statement real chat templates use (see parser.h), all of
// Jinja2's filters but random and urlize, all of its tests, the globals
// range, namespace, dict, cycler, joiner, the str / dict / list methods
// templates call (strip, split, startswith, replace, format, items, get ...),
// Python's printing of values, Jinja2's Undefined (printing empty; using it
// otherwise raises UndefinedError) and HTML-safe strings (`safe`, `escape`).
// Refused as the reference refuses: what modifies a value (list.append,
// dict.update ...: SecurityError), attributes starting with "_", ranges
// over 100000 items. Not supported (UNIMPLEMENTED): loading other
// templates (extends, include, import), blocks, autoescape, integers beyond
// 64 bits, the filters random and urlize.
//
// Sandboxed and bounded: a render does no I/O and reads no clock but the one
// given; it fails with RESOURCE_EXHAUSTED, saying which limit, when it
// exceeds the steps, call depth, output size or time of its Limits. Parsing
// bounds nesting (parser.h).
//
// Provenance: the output is a Text whose client spans are the bytes that
// came from client values (Value's provenance), and whose marks give, for
// each tracked object (RenderInput::tracked), where the first iteration of a
// `for` loop bound to it started writing non-whitespace output.
#ifndef CAIRN_CHAT_JINJA_TEMPLATE_H_
#define CAIRN_CHAT_JINJA_TEMPLATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "chat/jinja/value.h"

namespace cairn::jinja {

struct Limits {
  // Statements, expression nodes and loop iterations evaluated.
  int64_t max_steps = 5'000'000;
  // Nested macro, caller and recursive-loop calls.
  int max_call_depth = 100;
  // Bytes of output, and of any one string or list built on the way.
  size_t max_output_bytes = 64 << 20;
  absl::Duration max_time = absl::Seconds(5);
};

struct RenderInput {
  // The template's variables (messages, tools, add_generation_prompt, ...).
  std::vector<std::pair<std::string, Value>> variables;
  // Objects (lists, dicts) whose renderings the output marks: mark k is
  // where a loop over tracked[k] started writing.
  std::vector<Value> tracked;
  // strftime_now's clock (local civil time); unset: the machine's.
  std::function<absl::CivilSecond()> now;
  Limits limits;
};

// Immutable after Create; Render is thread-safe (each render has its own
// state).
class Template final {
 public:
  // Parses `source`. INVALID_ARGUMENT "TemplateSyntaxError: ..." (or
  // "TemplateAssertionError: No filter named ..."), with the line as
  // ErrorLine, for a template Jinja2 would not compile; UNIMPLEMENTED for a
  // construct cairn does not support; RESOURCE_EXHAUSTED for nesting beyond
  // kMaxParseDepth.
  static absl::StatusOr<std::shared_ptr<const Template>> Create(std::string_view source);

  // Renders the template. INVALID_ARGUMENT "<Python exception>: <message>"
  // (with ErrorLine) where Jinja2 raises, including the template's own
  // raise_exception ("TemplateError: ..."); UNIMPLEMENTED for what cairn
  // does not support; RESOURCE_EXHAUSTED when a limit is exceeded.
  absl::StatusOr<Text> Render(const RenderInput& input) const;
  // The same, and the offset in the output where each write of the template
  // itself begins (a data run, a {{ }}, a macro call's whole output), in
  // order: the places a caller can cut the output without splitting one.
  absl::StatusOr<Text> Render(const RenderInput& input, std::vector<size_t>* write_offsets) const;

  ~Template();

 private:
  struct Tree;
  explicit Template(std::unique_ptr<Tree> tree);
  std::unique_ptr<Tree> tree_;
};

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_TEMPLATE_H_
