// Where an S3 store's endpoint, region and credentials come from: StoreOptions first, then the standard
// AWS environment, in the order docs/store.md states:
//   credentials: options; else AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else the
//                profile AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials),
//                then in AWS_CONFIG_FILE (~/.aws/config); else none (requests go unsigned).
//                Each empty option falls back on its own, but a session token is taken from the
//                environment only together with the access key it belongs to.
//   region:      options; AWS_REGION; AWS_DEFAULT_REGION; the profile's `region`; us-east-1.
//   endpoint:    options; AWS_ENDPOINT_URL_S3; AWS_ENDPOINT_URL; the profile's `endpoint_url`;
//                https://s3.<region>.amazonaws.com.
// Thread-safety: pure functions of their arguments (the environment comes in as a lookup function).
#ifndef LLAMAY_STORE_S3_CONFIG_H_
#define LLAMAY_STORE_S3_CONFIG_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/store.h"

namespace llamay::store {

struct S3Config {
  std::string endpoint;          // scheme://host[:port][/base path], no trailing '/'
  bool custom_endpoint = false;  // false: AWS's own endpoint for the region
  std::string region;
  std::string access_key, secret_key, session_token;  // empty access key: unsigned requests
  std::string credential_source;  // for messages: "options", "environment", "profile p in FILE", "none"
  bool path_style = true;
};

// Returns the value of an environment variable, or nothing when unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnvironment();

Result<S3Config> ResolveS3Config(const StoreOptions& options, std::string_view bucket, const EnvLookup& env);

// One section of an INI file (~/.aws/credentials: "[name]"; ~/.aws/config: "[profile name]" or
// "[default]"): its top-level key = value pairs. Nothing when the file or section is absent.
std::optional<std::map<std::string, std::string>> ReadIniSection(const std::string& path,
                                                                 const std::string& section);

// True when `bucket` can be a DNS label of a virtual-hosted request (3..63 of [a-z0-9-], no dots).
bool DnsCompatibleBucket(std::string_view bucket);

}  // namespace llamay::store

#endif  // LLAMAY_STORE_S3_CONFIG_H_
