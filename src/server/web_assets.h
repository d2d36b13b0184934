// The built-in page's files, embedded at build time (embed_web.cmake generates the table from web/).
#ifndef LLAMAY_SERVER_WEB_ASSETS_H_
#define LLAMAY_SERVER_WEB_ASSETS_H_

#include <cstddef>

namespace llamay::server {

struct WebAsset {
  const char* path;           // the URL path: "/" + the file's path under web/ ("/index.html")
  const char* mime;           // Content-Type
  const unsigned char* data;  // the file's bytes
  size_t size;
  const unsigned char* gzip;  // a gzip copy, or null where compressing saves little
  size_t gzip_size;
  const char* etag;       // quoted, from the bytes' SHA-256
  const char* gzip_etag;  // the gzip copy's (another representation, so another tag)
};

// kWebAssetCount entries (at least one element exists, so the array is never empty; it is null when
// web/ had no file).
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_WEB_ASSETS_H_
