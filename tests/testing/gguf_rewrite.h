// Variants of a model file for tests: the same GGUF with keys dropped or
// added and tensors renamed, dropped or added, written to a buffer.
#ifndef CAIRN_TESTS_TESTING_GGUF_REWRITE_H_
#define CAIRN_TESTS_TESTING_GGUF_REWRITE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"

namespace cairn::testing {

// `orig` rewritten: its metadata without the keys in `drop`, plus what `edit`
// sets or adds (keys, tensors); its tensors renamed by `rename` (an empty
// name drops one). Serialized, for ModelFile::FromBuffer.
inline std::vector<uint8_t> RewriteGguf(const ModelFile& orig, const std::vector<std::string>& drop,
                                        const std::function<void(GgufWriter&)>& edit,
                                        const std::function<std::string(const std::string&)>& rename = nullptr) {
  GgufWriter w;
  for (const auto& [key, value] : orig.metadata().entries()) {
    if (std::find(drop.begin(), drop.end(), key) == drop.end()) w.Set(key, value);
  }
  if (edit) edit(w);
  for (const TensorInfo* t : orig.tensors()) {
    const std::string name = rename ? rename(t->name) : t->name;
    if (!name.empty()) w.AddTensor(name, t->type, t->shape, std::vector<uint8_t>(t->data, t->data + t->n_bytes));
  }
  return w.Serialize();
}

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_GGUF_REWRITE_H_
