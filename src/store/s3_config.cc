#include "store/s3_config.h"

#include <cstdlib>
#include <fstream>

namespace llamay::store {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

Status ConfigError(const std::string& why) {
  return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidConfig, "S3 store: " + why);
}

// Checks an endpoint URL and returns it without a trailing '/'.
Result<std::string> CleanEndpoint(std::string e, const std::string& from) {
  while (!e.empty() && e.back() == '/') e.pop_back();
  const size_t scheme_end = e.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : e.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return ConfigError("endpoint from " + from + " must start with http:// or https://");
  }
  const std::string rest = e.substr(scheme_end + 3);
  const std::string authority = rest.substr(0, rest.find('/'));
  if (authority.empty()) return ConfigError("endpoint from " + from + " has no host");
  // Never echo the endpoint here: it might hold a password.
  if (authority.find('@') != std::string::npos) {
    return ConfigError("endpoint from " + from + " carries user information; give credentials separately");
  }
  if (e.find_first_of("?# ") != std::string::npos) {
    return ConfigError("endpoint from " + from + " must not have a query, fragment or space");
  }
  return e;
}

struct Profile {
  std::string name;
  bool explicit_name = false;  // AWS_PROFILE was set
  std::string credentials_file, config_file;
  std::optional<std::map<std::string, std::string>> credentials, config;

  // A key from the credentials file, else from the config file; "" when neither has it.
  std::string Get(const std::string& key, std::string* from = nullptr) const {
    if (credentials && credentials->count(key)) {
      if (from) *from = "profile " + name + " in " + credentials_file;
      return credentials->at(key);
    }
    if (config && config->count(key)) {
      if (from) *from = "profile " + name + " in " + config_file;
      return config->at(key);
    }
    return "";
  }
};

Profile LoadProfile(const EnvLookup& env) {
  Profile p;
  const auto profile = env("AWS_PROFILE");
  p.explicit_name = profile.has_value();
  p.name = profile.value_or("default");
  const std::string home = env("HOME").value_or("");
  p.credentials_file = env("AWS_SHARED_CREDENTIALS_FILE").value_or(home + "/.aws/credentials");
  p.config_file = env("AWS_CONFIG_FILE").value_or(home + "/.aws/config");
  p.credentials = ReadIniSection(p.credentials_file, p.name);
  p.config = ReadIniSection(p.config_file, "profile " + p.name);
  if (!p.config && p.name == "default") p.config = ReadIniSection(p.config_file, "default");
  return p;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::optional<std::map<std::string, std::string>> ReadIniSection(const std::string& path,
                                                                 const std::string& section) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::optional<std::map<std::string, std::string>> out;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      const size_t close = t.find(']');
      std::string name;
      // "[profile  x]" and "[ x ]" name the same section as "[profile x]" and "[x]".
      for (const char c : Trim(t.substr(1, close == std::string_view::npos ? t.size() : close - 1))) {
        if ((c == ' ' || c == '\t') && (name.empty() || name.back() == ' ')) continue;
        name += c == '\t' ? ' ' : c;
      }
      inside = name == section;
      if (inside && !out) out.emplace();
      continue;
    }
    if (!inside || line[0] == ' ' || line[0] == '\t') continue;  // indented: a nested setting
    const size_t eq = t.find('=');
    if (eq == std::string_view::npos) continue;
    (*out)[std::string(Trim(t.substr(0, eq)))] = std::string(Trim(t.substr(eq + 1)));
  }
  return out;
}

bool DnsCompatibleBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63 || b.front() == '-' || b.back() == '-') return false;
  for (char c : b)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Result<S3Config> ResolveS3Config(const StoreOptions& options, std::string_view bucket, const EnvLookup& env) {
  S3Config c;
  const Profile profile = LoadProfile(env);

  // Credentials: options, else a complete pair from the environment, else the profile.
  std::string env_access, env_secret, env_token, env_source;
  if (const auto id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY"); id && secret) {
    env_access = *id;
    env_secret = *secret;
    env_token = env("AWS_SESSION_TOKEN").value_or("");
    env_source = "environment (AWS_ACCESS_KEY_ID)";
  } else if (!profile.Get("aws_access_key_id", &env_source).empty()) {
    env_access = profile.Get("aws_access_key_id");
    env_secret = profile.Get("aws_secret_access_key");
    env_token = profile.Get("aws_session_token");
  } else if (profile.explicit_name && !profile.credentials && !profile.config && options.access_key.empty()) {
    return ConfigError("AWS_PROFILE=" + profile.name + ": no such profile in " + profile.credentials_file +
                       " or " + profile.config_file);
  }
  c.access_key = options.access_key.empty() ? env_access : options.access_key;
  c.secret_key = options.secret_key.empty() ? env_secret : options.secret_key;
  c.session_token = !options.session_token.empty() ? options.session_token
                    : options.access_key.empty()   ? env_token
                                                   : "";
  c.credential_source = !options.access_key.empty() ? "options" : env_access.empty() ? "none" : env_source;
  if (c.access_key.empty() != c.secret_key.empty()) {
    return ConfigError(std::string(c.access_key.empty() ? "a secret key" : "an access key") + " from " +
                       (options.access_key.empty() && options.secret_key.empty() ? c.credential_source
                                                                                 : std::string("options")) +
                       " without " + (c.access_key.empty() ? "an access key" : "a secret key"));
  }
  if (c.access_key.empty() && !c.session_token.empty()) return ConfigError("a session token without keys");
  if (c.access_key.find_first_of(":/ \r\n") != std::string::npos) {
    return ConfigError("the access key from " + c.credential_source + " has a character keys never have");
  }

  // Region.
  c.region = !options.region.empty() ? options.region
                                     : env("AWS_REGION").value_or(env("AWS_DEFAULT_REGION").value_or(""));
  if (c.region.empty()) c.region = profile.Get("region");
  if (c.region.empty()) c.region = "us-east-1";
  for (char ch : c.region) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
          ch == '_')) {
      return ConfigError("region \"" + c.region + "\" is not a region name");
    }
  }

  // Endpoint.
  std::string endpoint = options.endpoint, from = "options";
  for (const char* var : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (!endpoint.empty()) break;
    endpoint = env(var).value_or("");
    from = var;
  }
  if (endpoint.empty()) endpoint = profile.Get("endpoint_url", &from);
  c.custom_endpoint = !endpoint.empty();
  if (!c.custom_endpoint) endpoint = "https://s3." + c.region + ".amazonaws.com";
  LLAMAY_ASSIGN_OR_RETURN(c.endpoint, CleanEndpoint(endpoint, c.custom_endpoint ? from : "the region"));

  c.path_style = options.path_style.has_value() ? *options.path_style
                                                : c.custom_endpoint || !DnsCompatibleBucket(bucket);
  return c;
}

}  // namespace llamay::store
