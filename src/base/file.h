// Files: whole-file reads and crash-safe writes.
//
// WriteFileAtomic writes to a temporary file in the destination's directory, fsyncs it, renames it over
// the destination and fsyncs the directory, so a reader sees the old file or the complete new one, never
// a partial write. On failure the temporary is removed and the destination is untouched.
// Thread-safety: functions are thread-safe; concurrent writers of one path race (the last rename wins).
#ifndef LLAMAY_BASE_FILE_H_
#define LLAMAY_BASE_FILE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace llamay {

Result<std::vector<uint8_t>> ReadFile(const std::string& path);

// Sink handed to a writer callback: Append adds bytes to the file being written.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Append(const void* data, size_t n) = 0;
};

// Calls `write(sink)` to produce the content; publishes the file only if it returns OK.
Status WriteFileAtomic(const std::string& path, const std::function<Status(ByteSink&)>& write);
Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes);

// A ByteSink that appends to a vector (for in-memory serialisation).
class VectorSink : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>* out) : out_(out) {}
  Status Append(const void* data, size_t n) override;

 private:
  std::vector<uint8_t>* out_;
};

}  // namespace llamay

#endif  // LLAMAY_BASE_FILE_H_
