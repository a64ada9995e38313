#include "backends/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cairn {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
// Caps that reject absurd files before any allocation sized by their counts.
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;
constexpr int64_t kMaxDim = int64_t{1} << 40;

// Reads little-endian values from a bounded buffer; every failure names the
// byte offset and what was expected there.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Truncated(uint64_t at, uint64_t need, std::string_view what) const {
    return absl::OutOfRangeError(
        absl::StrFormat("%s: truncated at byte offset %d: expected %s (%d bytes) but the file has %d bytes", name_, at,
                        what, need, size_));
  }
  absl::Status Invalid(uint64_t at, std::string_view message) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: at byte offset %d: %s", name_, at, message));
  }

  template <typename T>
  absl::Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(pos_, sizeof(T), what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, std::string_view what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    if (absl::Status s = Read(&len, absl::StrCat(std::string(what), " length")); !s.ok()) return s;
    if (len > kMaxStringBytes) {
      return Invalid(at, absl::StrFormat("%s length %d exceeds the %d-byte limit", what, len, kMaxStringBytes));
    }
    if (len > remaining()) {
      return absl::OutOfRangeError(
          absl::StrFormat("%s: at byte offset %d: %s of %d bytes runs past the end of the file (%d bytes remain)",
                          name_, at, what, len, remaining()));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

// Minimum encoded size of a value of a type: bounds array counts by the
// bytes actually present before anything is allocated.
uint64_t MinEncodedSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool KnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

absl::Status ReadScalar(Cursor& c, GgufValueType t, MetadataValue::Scalar* out) {
  auto read_as = [&](auto tag, auto widen) -> absl::Status {
    decltype(tag) v{};
    if (absl::Status s = c.Read(&v, ValueTypeName(t)); !s.ok()) return s;
    *out = widen(v);
    return absl::OkStatus();
  };
  auto to_i = [](auto v) { return MetadataValue::Scalar(static_cast<int64_t>(v)); };
  auto to_u = [](auto v) { return MetadataValue::Scalar(static_cast<uint64_t>(v)); };
  auto to_d = [](auto v) { return MetadataValue::Scalar(static_cast<double>(v)); };
  switch (t) {
    case GgufValueType::kUint8:
      return read_as(uint8_t{}, to_u);
    case GgufValueType::kInt8:
      return read_as(int8_t{}, to_i);
    case GgufValueType::kUint16:
      return read_as(uint16_t{}, to_u);
    case GgufValueType::kInt16:
      return read_as(int16_t{}, to_i);
    case GgufValueType::kUint32:
      return read_as(uint32_t{}, to_u);
    case GgufValueType::kInt32:
      return read_as(int32_t{}, to_i);
    case GgufValueType::kUint64:
      return read_as(uint64_t{}, to_u);
    case GgufValueType::kInt64:
      return read_as(int64_t{}, to_i);
    case GgufValueType::kFloat32:
      return read_as(float{}, to_d);
    case GgufValueType::kFloat64:
      return read_as(double{}, to_d);
    case GgufValueType::kBool: {
      const uint64_t at = c.offset();
      uint8_t b = 0;
      if (absl::Status s = c.Read(&b, "bool"); !s.ok()) return s;
      if (b > 1) return c.Invalid(at, absl::StrFormat("expected a bool (0 or 1), found %d", b));
      *out = b == 1;
      return absl::OkStatus();
    }
    case GgufValueType::kString: {
      std::string str;
      if (absl::Status s = c.ReadString(&str, "string value"); !s.ok()) return s;
      *out = std::move(str);
      return absl::OkStatus();
    }
    case GgufValueType::kArray:
      break;
  }
  return absl::InternalError("ReadScalar called with array type");
}

absl::Status ReadValue(Cursor& c, GgufValueType t, MetadataValue* out) {
  if (t != GgufValueType::kArray) {
    MetadataValue::Scalar s;
    if (absl::Status st = ReadScalar(c, t, &s); !st.ok()) return st;
    *out = MetadataValue::FromScalar(t, std::move(s));
    return absl::OkStatus();
  }
  const uint64_t at = c.offset();
  uint32_t elem = 0;
  if (absl::Status s = c.Read(&elem, "array element type"); !s.ok()) return s;
  if (!KnownValueType(elem)) {
    return c.Invalid(at, absl::StrFormat("expected an array element type (0..12), found %d", elem));
  }
  const GgufValueType et = static_cast<GgufValueType>(elem);
  if (et == GgufValueType::kArray) return c.Invalid(at, "nested arrays are not supported");
  const uint64_t count_at = c.offset();
  uint64_t count = 0;
  if (absl::Status s = c.Read(&count, "array length"); !s.ok()) return s;
  if (count > c.remaining() / MinEncodedSize(et)) {
    return absl::OutOfRangeError(
        absl::StrFormat("at byte offset %d: array of %d %s values runs past the end of the file (%d bytes remain)",
                        count_at, count, ValueTypeName(et), c.remaining()));
  }
  if (et == GgufValueType::kString) {
    std::vector<std::string> values(count);
    for (uint64_t i = 0; i < count; ++i) {
      if (absl::Status s = c.ReadString(&values[i], "array string"); !s.ok()) return s;
    }
    *out = MetadataValue::FromStringArray(std::move(values));
  } else {
    std::vector<MetadataValue::Scalar> values(count);
    for (uint64_t i = 0; i < count; ++i) {
      if (absl::Status s = ReadScalar(c, et, &values[i]); !s.ok()) return s;
    }
    *out = MetadataValue::FromNumberArray(et, std::move(values));
  }
  return absl::OkStatus();
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat("cannot open '", path, "': ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* m = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat("cannot mmap '", path, "': ", std::strerror(err)));
    }
    file->mapping_ = m;
    file->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);  // the mapping keeps the file contents alive
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::span<const uint8_t> bytes, std::string name) {
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->path_ = std::move(name);
  file->owned_.assign(bytes.begin(), bytes.end());
  file->base_ = file->owned_.data();
  file->size_ = file->owned_.size();
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

namespace {

// Reads one metadata key and value into `metadata`.
absl::Status ReadMetadataEntry(Cursor& c, Metadata* metadata) {
  const uint64_t at = c.offset();
  std::string key;
  if (absl::Status s = c.ReadString(&key, "metadata key"); !s.ok()) return s;
  const uint64_t type_at = c.offset();
  uint32_t type = 0;
  if (absl::Status s = c.Read(&type, "metadata value type"); !s.ok()) return s;
  if (!KnownValueType(type)) {
    return c.Invalid(type_at,
                     absl::StrFormat("expected a metadata value type (0..12) for key '%s', found %d", key, type));
  }
  MetadataValue value;
  if (absl::Status s = ReadValue(c, static_cast<GgufValueType>(type), &value); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (in the value of key '", key, "')"));
  }
  if (metadata->Has(key)) return c.Invalid(at, absl::StrCat("duplicate metadata key '", key, "'"));
  metadata->Set(std::move(key), std::move(value));
  return absl::OkStatus();
}

// general.alignment when given (a power of two up to kMaxAlignment), else
// `fallback`.
absl::StatusOr<uint64_t> AlignmentOf(const Metadata& metadata, const std::string& path, uint64_t fallback) {
  const MetadataValue* a = metadata.Find("general.alignment");
  if (a == nullptr) return fallback;
  absl::StatusOr<uint64_t> align = metadata.GetUint("general.alignment");
  if (!align.ok()) return align.status();
  if (*align == 0 || (*align & (*align - 1)) != 0 || *align > kMaxAlignment) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: general.alignment %s is not a power of two up to %d", path, a->ToString(), kMaxAlignment));
  }
  return *align;
}

// Reads a tensor's shape: 1..kMaxTensorDims dimensions whose product fits in
// 64 bits. Returns the element count.
absl::StatusOr<int64_t> ReadShape(Cursor& c, TensorInfo& t) {
  uint32_t n_dims = 0;
  const uint64_t dims_at = c.offset();
  if (absl::Status s = c.Read(&n_dims, "tensor dimension count"); !s.ok()) return s;
  if (n_dims == 0 || n_dims > kMaxTensorDims) {
    return c.Invalid(
        dims_at, absl::StrFormat("tensor '%s': expected 1..%d dimensions, found %d", t.name, kMaxTensorDims, n_dims));
  }
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim_at = c.offset();
    int64_t ne = 0;
    if (absl::Status s = c.Read(&ne, "tensor dimension"); !s.ok()) return s;
    if (ne <= 0 || ne > kMaxDim || n_elements > std::numeric_limits<int64_t>::max() / ne) {
      return c.Invalid(dim_at, absl::StrFormat("tensor '%s': dimension %d is %d, expected 1..%d with a "
                                               "total element count that fits in 64 bits",
                                               t.name, d, ne, kMaxDim));
    }
    n_elements *= ne;
    t.shape.push_back(ne);
  }
  return n_elements;
}

// Reads one tensor info: name, shape, type (rows whole blocks of it), data
// offset (a multiple of `alignment`) and the byte size that follows.
absl::StatusOr<TensorInfo> ReadTensorInfo(Cursor& c, const std::string& path, uint64_t alignment) {
  TensorInfo t;
  if (absl::Status s = c.ReadString(&t.name, "tensor name"); !s.ok()) return s;
  const uint64_t dims_at = c.offset();
  absl::StatusOr<int64_t> n_elements = ReadShape(c, t);
  if (!n_elements.ok()) return n_elements.status();
  const uint64_t type_at = c.offset();
  uint32_t type_id = 0;
  if (absl::Status s = c.Read(&type_id, "tensor type"); !s.ok()) return s;
  std::optional<GgmlTypeTraits> traits = TraitsOf(type_id);
  if (!traits) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: at byte offset %d: tensor '%s' has unsupported type id %d (supported: F32, F16, BF16, "
                        "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
                        path, type_at, t.name, type_id));
  }
  t.type = static_cast<GgmlType>(type_id);
  if (t.shape[0] % traits->block_size != 0) {
    return c.Invalid(dims_at, absl::StrFormat("tensor '%s': row width %d is not a multiple of the %s block "
                                              "size %d",
                                              t.name, t.shape[0], traits->name, traits->block_size));
  }
  const uint64_t offset_at = c.offset();
  if (absl::Status s = c.Read(&t.offset, "tensor data offset"); !s.ok()) return s;
  if (t.offset % alignment != 0) {
    return c.Invalid(offset_at, absl::StrFormat("tensor '%s': data offset %d is not a multiple of the "
                                                "alignment %d",
                                                t.name, t.offset, alignment));
  }
  const uint64_t blocks = static_cast<uint64_t>(*n_elements / traits->block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
    return c.Invalid(dims_at, absl::StrFormat("tensor '%s': size overflows", t.name));
  }
  t.n_bytes = blocks * traits->block_bytes;
  return t;
}

}  // namespace

absl::Status GgufFile::Parse() {
  Cursor c(base_, size_, path_);
  uint32_t magic = 0;
  if (absl::Status s = c.Read(&magic, "the GGUF magic"); !s.ok()) return s;
  if (magic != kGgufMagic) {
    return c.Invalid(0, absl::StrFormat("expected the GGUF magic \"GGUF\" (0x%08x), found 0x%08x", kGgufMagic, magic));
  }
  if (absl::Status s = c.Read(&version_, "the GGUF version"); !s.ok()) return s;
  if (version_ != 2 && version_ != 3) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: at byte offset 4: unsupported GGUF version %d (expected 2 or 3)", path_, version_));
  }
  uint64_t n_tensors = 0, n_kv = 0;
  if (absl::Status s = c.Read(&n_tensors, "the tensor count"); !s.ok()) return s;
  if (absl::Status s = c.Read(&n_kv, "the metadata count"); !s.ok()) return s;
  // Each key/value needs at least 8 (key length) + 4 (type) + 1 bytes, each
  // tensor info 8 + 4 + 4 + 8 bytes. A count beyond even the whole file's
  // size is absurd; a smaller one that does not fit means the file is
  // truncated, which the loops below report where the bytes run out.
  if (n_kv > c.remaining() / 13 && n_kv > size_) {
    return c.Invalid(16, absl::StrFormat("metadata count %d is impossible for a file of %d bytes", n_kv, size_));
  }
  if (n_tensors > c.remaining() / 24 && n_tensors > size_) {
    return c.Invalid(8, absl::StrFormat("tensor count %d is impossible for a file of %d bytes", n_tensors, size_));
  }
  for (uint64_t i = 0; i < n_kv; ++i) {
    if (absl::Status s = ReadMetadataEntry(c, &metadata_); !s.ok()) return s;
  }
  absl::StatusOr<uint64_t> alignment = AlignmentOf(metadata_, path_, alignment_);
  if (!alignment.ok()) return alignment.status();
  alignment_ = *alignment;

  tensors_.reserve(std::min<uint64_t>(n_tensors, c.remaining() / 24));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.offset();
    absl::StatusOr<TensorInfo> t = ReadTensorInfo(c, path_, alignment_);
    if (!t.ok()) return t.status();
    if (!names.insert(t->name).second) return c.Invalid(at, absl::StrCat("duplicate tensor name '", t->name, "'"));
    tensors_.push_back(*std::move(t));
  }
  data_offset_ = AlignUp(c.offset(), alignment_);
  if (data_offset_ > size_ && n_tensors > 0) {
    return c.Truncated(c.offset(), data_offset_ - c.offset(), "padding before the tensor data");
  }
  return PlaceTensorData();
}

// Bounds and overlaps, checked in offset order; then each tensor's pointer.
absl::Status GgufFile::PlaceTensorData() {
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (size_t k = 0; k < order.size(); ++k) {
    TensorInfo& t = tensors_[order[k]];
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return absl::OutOfRangeError(absl::StrFormat(
          "%s: tensor '%s' data [%d, %d) runs past the end of the file (%d bytes; data section starts at %d)", path_,
          t.name, data_offset_ + t.offset, data_offset_ + t.offset + t.n_bytes, size_, data_offset_));
    }
    if (k > 0) {
      const TensorInfo& prev = tensors_[order[k - 1]];
      if (prev.offset + prev.n_bytes > t.offset) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' data at byte offset %d overlaps tensor '%s' ([%d, %d)); expected offsets at or "
            "after %d",
            path_, t.name, data_offset_ + t.offset, prev.name, data_offset_ + prev.offset,
            data_offset_ + prev.offset + prev.n_bytes, data_offset_ + prev.offset + prev.n_bytes));
      }
    }
    t.data = base_ + data_offset_ + t.offset;
  }
  return absl::OkStatus();
}

namespace {

// "<prefix>-00001-of-00003.gguf" -> (prefix, 1, 3)
struct SplitName {
  std::string prefix;
  int index = 0;
  int count = 0;
};

std::optional<SplitName> ParseSplitName(const std::string& path) {
  // Suffix "-NNNNN-of-MMMMM.gguf" is 20 characters.
  constexpr size_t kSuffix = 20;
  if (path.size() <= kSuffix) return std::nullopt;
  const std::string_view tail = std::string_view(path).substr(path.size() - kSuffix);
  auto digits = [](std::string_view s) {
    int v = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return -1;
      v = v * 10 + (ch - '0');
    }
    return v;
  };
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || tail.substr(15) != ".gguf") return std::nullopt;
  SplitName s{path.substr(0, path.size() - kSuffix), digits(tail.substr(1, 5)), digits(tail.substr(10, 5))};
  if (s.index < 1 || s.count < 1 || s.index > s.count) return std::nullopt;
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path) {
  auto model = std::unique_ptr<ModelFile>(new ModelFile());
  model->path_ = path;
  std::optional<SplitName> split = ParseSplitName(path);
  if (!split || split->count == 1) {
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
    if (!f.ok()) return f.status();
    absl::StatusOr<int64_t> count = (*f)->metadata().GetIntOr("split.count", 1);
    if (!count.ok()) return count.status();
    if (*count > 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s declares split.count = %d but its name does not follow <name>-00001-of-%05d.gguf", path, *count, *count));
    }
    model->files_.push_back(*std::move(f));
  } else {
    for (int i = 1; i <= split->count; ++i) {
      const std::string part = absl::StrFormat("%s-%05d-of-%05d.gguf", split->prefix, i, split->count);
      absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(part);
      if (!f.ok()) {
        if (absl::IsNotFound(f.status())) {
          return absl::NotFoundError(
              absl::StrFormat("split %d of %d is missing: %s", i, split->count, f.status().message()));
        }
        return f.status();
      }
      const Metadata& md = (*f)->metadata();
      absl::StatusOr<int64_t> no = md.GetIntOr("split.no", i - 1);
      absl::StatusOr<int64_t> count = md.GetIntOr("split.count", split->count);
      if (!no.ok()) return no.status();
      if (!count.ok()) return count.status();
      if (*no != i - 1 || *count != split->count) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: split.no = %d, split.count = %d, but its name says split %d of %d", part, *no, *count,
                            i - 1, split->count));
      }
      model->files_.push_back(*std::move(f));
    }
  }
  if (absl::Status s = model->Index(); !s.ok()) return s;
  return model;
}

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::FromBuffer(std::span<const uint8_t> bytes, std::string name) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBuffer(bytes, name);
  if (!f.ok()) return f.status();
  auto model = std::unique_ptr<ModelFile>(new ModelFile());
  model->path_ = std::move(name);
  model->files_.push_back(*std::move(f));
  if (absl::Status s = model->Index(); !s.ok()) return s;
  return model;
}

absl::Status ModelFile::Index() {
  for (size_t fi = 0; fi < files_.size(); ++fi) {
    for (TensorInfo& t : files_[fi]->tensors_) {
      t.file_index = static_cast<int>(fi);
      if (!by_name_.emplace(t.name, &t).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("tensor '%s' appears in more than one split (%s)", t.name, files_[fi]->path()));
      }
      ordered_.push_back(&t);
    }
  }
  return absl::OkStatus();
}

const TensorInfo* ModelFile::FindTensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<const TensorInfo*> ModelFile::GetTensor(std::string_view name) const {
  const TensorInfo* t = FindTensor(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("tensor '", std::string(name), "' not found in ", path_));
  return t;
}

absl::StatusOr<std::string> ModelFile::Architecture() const { return metadata().GetString("general.architecture"); }

void ModelFile::ReleasePages(const uint8_t* data, size_t bytes) const {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<uintptr_t>(data);
  for (const std::unique_ptr<GgufFile>& f : files_) {
    const auto base = reinterpret_cast<uintptr_t>(f->base_);
    if (f->mapping_ == nullptr || at < base || at - base > f->size_ || bytes > f->size_ - (at - base)) continue;
    // Whole pages only: the partial ones at either end hold other tensors.
    const uintptr_t begin = (at + page - 1) / page * page;
    const uintptr_t end = (at + bytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    return;
  }
}

}  // namespace cairn
