// GGUF reader and writer.
//
// A File is an immutable, validated view of a GGUF v2/v3 file, backed by a read-only mmap of the file or by
// an owned in-memory buffer. Open/FromBuffer check everything before returning (magic, version, counts
// against the bytes present, string and array lengths, value types, tensor dims and types, alignment,
// tensor data in bounds and not overlapping): a hostile or truncated file gives an error naming the
// problem, never a crash. After that, every accessor is bounds-safe.
//
// Writer builds a GGUF v3 file in memory (for tests, tools and the demo model).
//
// Thread-safety: a File is immutable after construction and safe to read from many threads.
#ifndef LLAMAY_GGUF_GGUF_H_
#define LLAMAY_GGUF_GGUF_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.h"
#include "base/status.h"
#include "base/tensor_type.h"

namespace llamay::gguf {

// GGUF metadata value types, numbered as in the format.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view ValueTypeName(ValueType t);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] is the row length (contiguous), as GGUF stores ne[]
  TensorType type;
  uint64_t offset = 0;        // from the start of the tensor data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapped file; valid while the File lives
  int64_t rows() const;           // product of dims[1..]
};

class File {
 public:
  static Result<File> Open(const std::string& path);           // mmap, read-only
  static Result<File> FromBuffer(std::vector<uint8_t> bytes);  // takes ownership
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const;
  uint64_t alignment() const;
  const std::string& path() const;  // empty for a buffer
  std::span<const uint8_t> bytes() const;

  // Metadata keys in file order.
  std::vector<std::string_view> Keys() const;
  bool Has(std::string_view key) const;
  // The type of a key's value (kArray for arrays); NotFound if absent.
  Result<ValueType> TypeOf(std::string_view key) const;
  // For an array key: its element type and length.
  Result<ValueType> ArrayElementType(std::string_view key) const;
  Result<uint64_t> ArrayLength(std::string_view key) const;

  // Typed getters. An integer getter accepts any integer type whose value fits; a float getter accepts
  // f32/f64 (and integers). A type that does not fit is InvalidArgument naming the key and both types.
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  std::string GetStringOr(std::string_view key, std::string_view fallback) const;
  int64_t GetIntOr(std::string_view key, int64_t fallback) const;
  double GetFloatOr(std::string_view key, double fallback) const;
  bool GetBoolOr(std::string_view key, bool fallback) const;

  // Arrays. Views are valid while the File lives.
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;   // f32/f64 elements
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;   // any integer or bool elements

  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* FindTensor(std::string_view name) const;  // nullptr if absent

  // A 32-byte identity of what the weights compute: every tensor's name, type, dims and data, and every
  // metadata value except the tokenizer's vocabulary and general.* descriptive keys. Fast (hashes tensor
  // data with XXH3-128 and the summary with SHA-256) and computed once per File (cached; thread-safe).
  const Digest& WeightDigest() const;

 private:
  struct Impl;
  explicit File(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Builds a GGUF v3 file. Keys and tensors appear in the order they were set/added.
class Writer {
 public:
  explicit Writer(uint64_t alignment = 32);
  ~Writer();
  void SetUint32(std::string key, uint32_t v);
  void SetInt32(std::string key, int32_t v);
  void SetUint64(std::string key, uint64_t v);
  void SetFloat32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string v);
  void SetStringArray(std::string key, std::vector<std::string> v);
  void SetFloat32Array(std::string key, std::vector<float> v);
  void SetInt32Array(std::string key, std::vector<int32_t> v);
  // `data` must hold exactly the bytes the type and dims need.
  Status AddTensor(std::string name, std::vector<int64_t> dims, TensorType type,
                   std::span<const uint8_t> data);
  std::vector<uint8_t> Finish() const;
  Status WriteFile(const std::string& path) const;  // atomic (temp + rename)

 private:
  struct Entry;
  struct Tensor;
  uint64_t alignment_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::vector<std::shared_ptr<Tensor>> tensors_;
};

}  // namespace llamay::gguf

#endif  // LLAMAY_GGUF_GGUF_H_
