// The two S3 XML documents the store reads: a ListObjectsV2 page (ListBucketResult) and an error body
// (<Error><Code>..</Code><Message>..</Message></Error>).
//
// A minimal, tolerant reader: it skips the prolog, comments, DOCTYPE, attributes and namespace prefixes,
// unescapes the five named entities and numeric character references, reads CDATA, and ignores elements
// it does not know (ETag, LastModified, Owner, CommonPrefixes, ...). It refuses what it cannot trust:
// unterminated or mismatched tags, a Contents without Key or with a Size that is not a number, and a
// truncated listing without a continuation token.
// Thread-safety: pure functions.
#ifndef LLAMAY_STORE_S3_XML_H_
#define LLAMAY_STORE_S3_XML_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/store.h"

namespace llamay::store {

struct ListPage {
  std::vector<ObjectInfo> objects;  // full keys, in the order the server sent them
  bool truncated = false;           // IsTruncated: there is a next page
  std::string next_token;           // NextContinuationToken (set when truncated)
};

// Errors are kInternal with detail StoreError::kBadResponse, saying what was wrong.
Result<ListPage> ParseListObjectsV2(std::string_view xml);

struct S3ErrorBody {
  std::string code;     // e.g. "NoSuchKey", "SignatureDoesNotMatch"; empty when the body is no S3 error
  std::string message;  // the server's explanation, at most 300 bytes
};
S3ErrorBody ParseS3Error(std::string_view xml);

// "&amp;" -> "&", "&#x41;" -> "A", ...; an unknown or malformed entity is kept as written.
std::string XmlUnescape(std::string_view text);

}  // namespace llamay::store

#endif  // LLAMAY_STORE_S3_XML_H_
