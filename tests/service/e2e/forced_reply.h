// A reply forced through a real server's path, for tests of parsed output
// (reasoning, tool calls) on demo models that would never produce it: the
// scheduler's hook SchedulerOptions::forced_token replaces the sampler's
// draw at each generated position with the next id of the reply set last;
// past its end the model samples again. One reply for the process (the
// hook is static), guarded by its own lock.
#ifndef CAIRN_TESTS_SERVICE_E2E_FORCED_REPLY_H_
#define CAIRN_TESTS_SERVICE_E2E_FORCED_REPLY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/server.h"

namespace cairn::service::e2e {

class ForcedReply final {
 public:
  // The hook for ServerOptions::scheduler.forced_token.
  static std::optional<TokenId> Next(const GenerateJob&, int32_t n) {
    ForcedReply& f = Instance();
    absl::MutexLock lock(&f.mu_);
    if (n < static_cast<int32_t>(f.ids_.size())) return f.ids_[static_cast<size_t>(n)];
    return std::nullopt;
  }

  // The next replies of `server`'s model `model` start with `text`
  // (tokenized as text: markers are plain pieces of the demo vocabulary),
  // then <|im_end|>. NOT_FOUND without the model or that token.
  static absl::Status Set(Server& server, const std::string& model, const std::string& text) {
    auto m = server.models().Find(model);
    if (!m.ok()) return m.status();
    const Tokenizer& tok = *(*m)->tokenizer;
    TokenizeOptions opt;
    opt.add_special = false;
    opt.parse_special = false;
    std::vector<TokenId> ids = tok.Tokenize(text, opt);
    const auto end = tok.FindToken("<|im_end|>");
    if (!end.has_value()) return absl::NotFoundError("the model has no <|im_end|> token");
    ids.push_back(*end);
    ForcedReply& f = Instance();
    absl::MutexLock lock(&f.mu_);
    f.ids_ = std::move(ids);
    return absl::OkStatus();
  }

 private:
  static ForcedReply& Instance() {
    static ForcedReply* reply = new ForcedReply();
    return *reply;
  }
  absl::Mutex mu_;
  std::vector<TokenId> ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::service::e2e

#endif  // CAIRN_TESTS_SERVICE_E2E_FORCED_REPLY_H_
