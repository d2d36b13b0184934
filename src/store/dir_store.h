// The directory backend of the snapshot store: one plain file per object, at <root>/<name>, so the files
// can be read, copied or synced with ordinary tools. Names with '/' live in subdirectories.
//
// Put writes <dir>/.<base>~tmp.<pid>.<random> (a name ValidObjectName refuses, so List never shows it),
// fsyncs it, renames it over the object and fsyncs the directory: a reader (or a kill -9 at any point)
// sees the old object or the whole new one. A crash may leave a temporary behind; nothing reads it.
// No checksum is added: the files are the bytes given, and damage is the snapshot layer's to detect
// (its CRC). A Get that reads fewer bytes than the file's size is kDataLoss.
// Limits: a name cannot be both an object and a folder of objects ("a" and "a/b"); the second Put fails.
// Delete leaves empty subdirectories (removing them would race a concurrent Put into them).
//
// Thread-safety: thread-safe and process-safe: every call is independent system calls; concurrent Puts
// of one name each publish a whole object and the last rename wins.
#ifndef LLAMAY_STORE_DIR_STORE_H_
#define LLAMAY_STORE_DIR_STORE_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "store/store.h"

namespace llamay::store {

// Opens (creating it and its parents if missing) the directory `path` as a store.
Result<std::unique_ptr<Store>> OpenDirStore(const std::string& path);

}  // namespace llamay::store

#endif  // LLAMAY_STORE_DIR_STORE_H_
