// The invocation podwire-cni reads; see config.h.
#include "cni-shim/config.h"

#include "cni-shim/json.h"

namespace podwire::cni {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// int64 from an integer literal (no fraction/exponent), |v| ≤ 10^15.
bool ParseInt(std::string_view text, int64_t* v) {
  bool neg = !text.empty() && text[0] == '-';
  if (neg) text.remove_prefix(1);
  if (text.empty() || text.size() > 15) return false;
  int64_t r = 0;
  for (char c : text) r = r * 10 + (c - '0');
  *v = neg ? -r : r;
  return true;
}

bool ConfigFail(ConfigError* err, int code, std::string msg) {
  if (err) {
    err->code = code;
    err->msg = std::move(msg);
  }
  return false;
}

// The pod annotations' keys from a runtimeConfig object's text, when it carries the CRI capability.
std::optional<std::vector<std::string>> AnnotationKeys(std::string_view runtime_config) {
  JsonValue rc;
  if (!JsonParse(runtime_config, &rc, nullptr)) return std::nullopt;
  const JsonValue* a = rc.Get(kPodAnnotationsCapability);
  if (!a || !a->is(JsonValue::Kind::kObject)) return std::nullopt;
  return a->keys;
}

}  // namespace

// ---------------------------------------------------------------- stdin config

bool ParseConfig(std::string_view text, Config* cfg, ConfigError* err) {
  *cfg = Config{};
  JsonError jerr;
  if (!JsonValidate(text, &jerr)) {
    return ConfigFail(err, kErrDecode,
                      "stdin is not valid JSON: " + jerr.what + " at byte " + std::to_string(jerr.offset));
  }
  // The text is valid JSON from here on: what remains is checking shapes.
  JsonReader r(text);
  r.Ws();
  // JSON that is not an object cannot be decoded into a network configuration at all: code 6, as
  // the agent answers (docs/cni.md "Error codes"); a known field of the wrong type is 7.
  if (r.Peek() != '{') return ConfigFail(err, kErrDecode, "the network configuration must be a JSON object");
  r.Expect('{', "");
  r.Ws();
  std::string key;
  bool first = true;
  while (r.Peek() != '}') {
    if (!first) {
      r.Expect(',', "");
      r.Ws();
    }
    first = false;
    r.String(&key);
    r.Ws();
    r.Expect(':', "");
    r.Ws();
    size_t start = r.pos();
    bool is_null = r.StartsLiteral("null");
    auto want = [&](const char* type) {
      return ConfigFail(err, kErrInvalidConfig, "config field \"" + key + "\" must be " + type);
    };
    if (key == "cniVersion" || key == "cni_agent_run_dir" || key == "pod_namespace") {
      std::string s;
      if (is_null) {
        r.Value();
      } else if (r.Peek() == '"') {
        r.String(&s);
      } else {
        return want("a string");
      }
      if (key == "cniVersion") {
        cfg->cni_version = is_null ? std::nullopt : std::optional<std::string>(s);
      } else if (key == "pod_namespace") {
        cfg->pod_namespace = s;
      } else if (is_null) {
        cfg->run_dir = std::string(kDefaultRunDir);
      } else {
        if (s.empty() || s[0] != '/') return want("an absolute path");
        if (s.find('\0') != std::string::npos) return want("a path without NUL bytes");
        while (!s.empty() && s.back() == '/') s.pop_back();
        cfg->run_dir = s;
      }
    } else if (key == "exclude_namespaces") {
      cfg->exclude_namespaces.clear();
      if (is_null) {
        r.Value();
      } else if (r.Peek() == '[') {
        r.Expect('[', "");
        r.Ws();
        bool first_el = true;
        while (r.Peek() != ']') {
          if (!first_el) {
            r.Expect(',', "");
            r.Ws();
          }
          first_el = false;
          if (r.Peek() != '"') return want("an array of strings");
          std::string s;
          r.String(&s);
          cfg->exclude_namespaces.push_back(std::move(s));
          r.Ws();
        }
        r.Expect(']', "");
      } else {
        return want("an array of strings");
      }
    } else if (key == "agent_wait_ms" || key == "agent_timeout_ms") {
      int64_t v = key == "agent_wait_ms" ? kDefaultAgentWaitMs : kDefaultAgentTimeoutMs;  // null: the default
      if (is_null) {
        r.Value();
      } else {
        char c = r.Peek();
        if (c != '-' && !IsDigit(c)) return want("an integer (milliseconds)");
        std::string_view num;
        bool is_int = false;
        r.Number(&num, &is_int);
        if (!is_int || !ParseInt(num, &v)) return want("an integer (milliseconds)");
        int64_t lo = key == "agent_wait_ms" ? 0 : 1;
        if (v < lo || v > kMaxConfigMs) {
          return want(lo == 0 ? "between 0 and 3600000 (milliseconds)" : "between 1 and 3600000 (milliseconds)");
        }
      }
      (key == "agent_wait_ms" ? cfg->agent_wait_ms : cfg->agent_timeout_ms) = v;
    } else if (key == "status_always_ok") {
      if (is_null) {
        r.Value();
        cfg->status_always_ok = false;
      } else if (r.StartsLiteral("true") || r.StartsLiteral("false")) {
        cfg->status_always_ok = r.StartsLiteral("true");
        r.Value();
      } else {
        return want("a boolean");
      }
    } else if (key == "prevResult") {
      if (is_null) {
        r.Value();
        cfg->prev_result.reset();
      } else if (r.Peek() == '{') {
        r.Value();
        cfg->prev_result = std::string(text.substr(start, r.pos() - start));
      } else {
        // A prevResult that is not an object does not decode (6), as the agent answers.
        return ConfigFail(err, kErrDecode, "config field \"prevResult\" must be an object");
      }
    } else if (key == "runtimeConfig") {
      r.Value();
      cfg->pod_annotation_keys = r.text()[start] == '{' ? AnnotationKeys(text.substr(start, r.pos() - start)) : std::nullopt;
    } else {
      r.Value();
    }
    r.Ws();
  }
  return true;
}

std::string_view ConfigCniVersion(const Config* cfg) {
  if (cfg && cfg->cni_version && !cfg->cni_version->empty()) return *cfg->cni_version;
  return kCurrentVersion;
}

std::string SocketPath(const Config& cfg) {
  std::string p = cfg.run_dir;
  p += '/';
  p += kSocketName;
  return p;
}

// ---------------------------------------------------------------- CNI_ARGS

bool ParseCniArgs(std::string_view s, CniArgs* out, std::string* err) {
  *out = CniArgs{};
  if (s.empty()) return true;
  size_t i = 0;
  for (;;) {
    size_t semi = s.find(';', i);
    std::string_view pair = s.substr(i, semi == std::string_view::npos ? std::string_view::npos : semi - i);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      if (err) *err = "CNI_ARGS: invalid pair \"" + Printable(pair) + "\" (expected KEY=VALUE)";
      *out = CniArgs{};
      return false;
    }
    std::string_view k = pair.substr(0, eq);
    std::string v(pair.substr(eq + 1));
    if (k == "K8S_POD_NAME") out->pod_name = std::move(v);
    else if (k == "K8S_POD_NAMESPACE") out->pod_namespace = std::move(v);
    else if (k == "K8S_POD_UID") out->pod_uid = std::move(v);
    else if (k == "K8S_POD_INFRA_CONTAINER_ID") out->infra_container_id = std::move(v);
    if (semi == std::string_view::npos) break;
    i = semi + 1;
  }
  return true;
}

// ---------------------------------------------------------------- environment

bool CollectCniEnv(const char* const* envp, std::vector<EnvVar>* out, std::string* err) {
  out->clear();
  bool ok = true;
  auto bad = [&](std::string what) {
    if (ok && err) *err = std::move(what);  // the first problem; the others are still collected
    ok = false;
  };
  std::vector<std::string> rejected;  // a name seen with a bad value: its later duplicates stay out too
  for (; envp && *envp; ++envp) {
    std::string_view e(*envp);
    if (e.substr(0, 4) != "CNI_") continue;
    size_t eq = e.find('=');
    if (eq == std::string_view::npos) continue;  // not a variable
    std::string_view name = e.substr(0, eq), value = e.substr(eq + 1);
    if (FindEnv(*out, name)) continue;
    bool seen = false;
    for (const auto& r : rejected) seen = seen || r == name;
    if (seen) continue;
    if (value.size() > kMaxEnvValue) {
      bad(std::string(name) + " is " + std::to_string(value.size()) + " bytes, over the 65536-byte limit");
    } else if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
      bad(std::string(IsValidUtf8(name) ? name : "a CNI_* variable") + " is not valid UTF-8");
    } else {
      out->push_back({std::string(name), std::string(value)});
      continue;
    }
    rejected.emplace_back(name);
  }
  return ok;
}

const EnvVar* FindEnv(const std::vector<EnvVar>& env, std::string_view name) {
  for (const auto& v : env)
    if (v.name == name) return &v;
  return nullptr;
}

// ---------------------------------------------------------------- commands

Command ParseCommand(std::string_view s) {
  if (s == "ADD") return Command::kAdd;
  if (s == "DEL") return Command::kDel;
  if (s == "CHECK") return Command::kCheck;
  if (s == "GC") return Command::kGc;
  if (s == "STATUS") return Command::kStatus;
  if (s == "VERSION") return Command::kVersion;
  return Command::kUnknown;
}


bool IsSupportedVersion(std::string_view v) {
  for (std::string_view s : kSupportedVersions)
    if (s == v) return true;
  return false;
}

std::string DecisionFilePath(const Config& cfg) {
  std::string p = cfg.run_dir;
  p += '/';
  p += kDecisionFileName;
  return p;
}

}  // namespace podwire::cni
