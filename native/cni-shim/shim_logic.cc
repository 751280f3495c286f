// The pure half of podwire-cni; see shim_logic.h.
#include "cni-shim/shim_logic.h"

#include <cstdio>
#include <cstring>

namespace podwire::cni {

namespace {

// ---------------------------------------------------------------- UTF-8

// Length of the well-formed UTF-8 sequence at s[i] (lead byte ≥ 0x80), or 0.
size_t Utf8SeqLen(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  size_t n = s.size() - i;
  unsigned char c = at(i);
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < n && at(i + k) >= lo && at(i + k) <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// ---------------------------------------------------------------- JSON reader

// A cursor over JSON text. Every method leaves the first error (offset +
// what) in err_ and returns false; values are never built except the
// strings a caller asks for.
class Reader {
 public:
  explicit Reader(std::string_view t) : t_(t) {}

  size_t pos() const { return p_; }
  bool AtEnd() const { return p_ >= t_.size(); }
  char Peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  const JsonError& error() const { return err_; }

  bool Fail(const char* what) {
    if (!failed_) {
      failed_ = true;
      err_.offset = p_;
      err_.what = what;
    }
    return false;
  }

  void Ws() {
    while (p_ < t_.size()) {
      char c = t_[p_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++p_;
    }
  }

  bool Expect(char c, const char* what) {
    if (Peek() != c || AtEnd()) return Fail(what);
    ++p_;
    return true;
  }

  // A string literal at p_; decoded into *out unless out is null.
  bool String(std::string* out) {
    if (Peek() != '"' || AtEnd()) return Fail("expected a string");
    ++p_;
    if (out) out->clear();
    for (;;) {
      if (AtEnd()) return Fail("unterminated string");
      char c = t_[p_];
      auto uc = static_cast<unsigned char>(c);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!Escape(out)) return false;
        continue;
      }
      if (uc < 0x20) return Fail("control character in a string");
      if (uc < 0x80) {
        if (out) out->push_back(c);
        ++p_;
        continue;
      }
      size_t n = Utf8SeqLen(t_, p_);
      if (n == 0) return Fail("invalid UTF-8 in a string");
      if (out) out->append(t_.data() + p_, n);
      p_ += n;
    }
  }

  // The text of a number at p_ (RFC 8259 grammar); *is_int: no fraction or exponent.
  bool Number(std::string_view* text, bool* is_int) {
    size_t start = p_;
    bool integer = true;
    if (Peek() == '-' && !AtEnd()) ++p_;
    if (AtEnd() || !IsDigit(t_[p_])) return Fail("invalid number");
    if (t_[p_] == '0') {
      ++p_;
    } else {
      while (!AtEnd() && IsDigit(t_[p_])) ++p_;
    }
    if (!AtEnd() && t_[p_] == '.') {
      integer = false;
      ++p_;
      if (AtEnd() || !IsDigit(t_[p_])) return Fail("invalid number: digit expected after '.'");
      while (!AtEnd() && IsDigit(t_[p_])) ++p_;
    }
    if (!AtEnd() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      integer = false;
      ++p_;
      if (!AtEnd() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (AtEnd() || !IsDigit(t_[p_])) return Fail("invalid number: digit expected in the exponent");
      while (!AtEnd() && IsDigit(t_[p_])) ++p_;
    }
    if (text) *text = t_.substr(start, p_ - start);
    if (is_int) *is_int = integer;
    return true;
  }

  // Skips (and validates) one value at p_, nested at most kMaxJsonDepth deep.
  bool Value(int depth = 0) {
    Ws();
    if (AtEnd()) return Fail("unexpected end of input");
    switch (t_[p_]) {
      case '{': {
        if (depth >= kMaxJsonDepth) return Fail("nested too deeply");
        ++p_;
        Ws();
        if (Peek() == '}' && !AtEnd()) {
          ++p_;
          return true;
        }
        for (;;) {
          Ws();
          if (!String(nullptr)) return false;
          Ws();
          if (!Expect(':', "expected ':' after an object key")) return false;
          if (!Value(depth + 1)) return false;
          Ws();
          if (AtEnd()) return Fail("unterminated object");
          if (t_[p_] == ',') {
            ++p_;
            continue;
          }
          if (t_[p_] == '}') {
            ++p_;
            return true;
          }
          return Fail("expected ',' or '}' in an object");
        }
      }
      case '[': {
        if (depth >= kMaxJsonDepth) return Fail("nested too deeply");
        ++p_;
        Ws();
        if (Peek() == ']' && !AtEnd()) {
          ++p_;
          return true;
        }
        for (;;) {
          if (!Value(depth + 1)) return false;
          Ws();
          if (AtEnd()) return Fail("unterminated array");
          if (t_[p_] == ',') {
            ++p_;
            continue;
          }
          if (t_[p_] == ']') {
            ++p_;
            return true;
          }
          return Fail("expected ',' or ']' in an array");
        }
      }
      case '"':
        return String(nullptr);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        if (t_[p_] == '-' || IsDigit(t_[p_])) return Number(nullptr, nullptr);
        return Fail("unexpected character");
    }
  }

  bool Literal(std::string_view word) {
    if (t_.substr(p_, word.size()) != word) return Fail("invalid literal");
    p_ += word.size();
    return true;
  }

  bool StartsLiteral(std::string_view word) const { return t_.substr(p_, word.size()) == word; }

 private:
  bool Hex4(uint32_t* v) {
    if (t_.size() - p_ < 4) return Fail("truncated \\u escape");
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
      int h = HexVal(t_[p_ + i]);
      if (h < 0) return Fail("invalid \\u escape");
      r = (r << 4) | static_cast<uint32_t>(h);
    }
    p_ += 4;
    *v = r;
    return true;
  }

  // At a backslash inside a string.
  bool Escape(std::string* out) {
    ++p_;
    if (AtEnd()) return Fail("unterminated string");
    char e = t_[p_++];
    char lit = 0;
    switch (e) {
      case '"': lit = '"'; break;
      case '\\': lit = '\\'; break;
      case '/': lit = '/'; break;
      case 'b': lit = '\b'; break;
      case 'f': lit = '\f'; break;
      case 'n': lit = '\n'; break;
      case 'r': lit = '\r'; break;
      case 't': lit = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!Hex4(&cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // A high surrogate joins a following \uDC00–\uDFFF; alone it is U+FFFD.
          if (t_.size() - p_ >= 6 && t_[p_] == '\\' && t_[p_ + 1] == 'u') {
            size_t save = p_;
            p_ += 2;
            uint32_t lo;
            if (!Hex4(&lo)) return false;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              p_ = save;  // the next escape stands on its own
              cp = 0xFFFD;
            }
          } else {
            cp = 0xFFFD;
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        if (out) AppendUtf8(out, cp);
        return true;
      }
      default:
        --p_;
        return Fail("invalid escape in a string");
    }
    if (out) out->push_back(lit);
    return true;
  }

  std::string_view t_;
  size_t p_ = 0;
  bool failed_ = false;
  JsonError err_;
};

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

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c)) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

// Printable ASCII copy of s, at most max bytes (for error messages quoting the peer).
std::string Printable(std::string_view s, size_t max = 64) {
  std::string r;
  for (char c : s.substr(0, max)) r.push_back(c >= 0x20 && c < 0x7F ? c : '?');
  if (s.size() > max) r += "...";
  return r;
}

Response Error(std::string what) {
  Response r;
  r.kind = Response::Kind::kError;
  r.error = std::move(what);
  return r;
}

}  // namespace

// ---------------------------------------------------------------- JSON text

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = Utf8SeqLen(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = Utf8SeqLen(s, i);
      if (n == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

std::string JsonString(std::string_view s) {
  std::string r;
  AppendJsonString(&r, s);
  return r;
}

bool JsonValidate(std::string_view text, JsonError* err) {
  Reader r(text);
  bool ok = r.Value();
  if (ok) {
    r.Ws();
    if (!r.AtEnd()) ok = r.Fail("unexpected data after the JSON value");
  }
  if (!ok && err) *err = r.error();
  return ok;
}

bool JsonUnquote(std::string_view literal, std::string* out, JsonError* err) {
  Reader r(literal);
  bool ok = r.String(out);
  if (ok && !r.AtEnd()) ok = r.Fail("unexpected data after the string");
  if (!ok && err) *err = r.error();
  return ok;
}

// ---------------------------------------------------------------- stdin config

bool ParseConfig(std::string_view text, Config* cfg, ConfigError* err) {
  *cfg = Config{};
  JsonError jerr;
  if (!JsonValidate(text, &jerr)) {
    return ConfigFail(err, kErrDecode,
                      "stdin is not valid JSON: " + jerr.what + " at byte " + std::to_string(jerr.offset));
  }
  // The text is valid JSON from here on: what remains is checking shapes.
  Reader r(text);
  r.Ws();
  if (r.Peek() != '{') return ConfigFail(err, kErrInvalidConfig, "the network configuration must be a JSON object");
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
      int64_t v = key == "agent_wait_ms" ? 10000 : 30000;  // null: the default
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
        return want("an object");
      }
    } else {
      r.Value();
    }
    r.Ws();
  }
  return true;
}

std::string_view ConfigCniVersion(const Config* cfg) {
  if (cfg && cfg->cni_version && !cfg->cni_version->empty()) return *cfg->cni_version;
  return kFallbackCniVersion;
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

// ---------------------------------------------------------------- request

std::string BuildRequestBody(std::string_view command, const std::vector<EnvVar>& env, std::string_view config) {
  std::string b;
  size_t est = 64 + config.size() + config.size() / 8;
  for (const auto& v : env) est += v.name.size() + v.value.size() + 8;
  b.reserve(est);
  b += "{\"command\":";
  AppendJsonString(&b, command);
  b += ",\"env\":{";
  for (size_t i = 0; i < env.size(); ++i) {
    if (i) b += ',';
    AppendJsonString(&b, env[i].name);
    b += ':';
    AppendJsonString(&b, env[i].value);
  }
  b += "},\"config\":";
  AppendJsonString(&b, config);
  b += '}';
  return b;
}

std::string BuildRequestHead(size_t body_len) {
  std::string h =
      "POST /v1/cni HTTP/1.1\r\n"
      "Host: podwire\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: ";
  h += std::to_string(body_len);
  h += "\r\nConnection: close\r\n\r\n";
  return h;
}

// ---------------------------------------------------------------- response

Response ParseResponse(std::string_view buf, bool eof, const ResponseLimits& limits) {
  const std::string head_limit = "response head over " + std::to_string(limits.max_head) + " bytes";
  size_t sl_end = buf.find("\r\n");
  if (sl_end == std::string_view::npos ? buf.size() > limits.max_head : sl_end + 2 > limits.max_head) {
    return Error(head_limit);
  }
  if (sl_end == std::string_view::npos) {
    if (!eof) return Response{};
    return Error(buf.empty() ? "the agent closed the connection without an answer"
                             : "truncated status line \"" + Printable(buf) + "\"");
  }

  // Status line: HTTP/1.x SP 3DIGIT [SP reason]
  std::string_view sl = buf.substr(0, sl_end);
  if (sl.size() < 12 || sl.substr(0, 7) != "HTTP/1." || !IsDigit(sl[7]) || sl[8] != ' ' || !IsDigit(sl[9]) ||
      !IsDigit(sl[10]) || !IsDigit(sl[11]) || (sl.size() > 12 && sl[12] != ' ')) {
    return Error("bad status line \"" + Printable(sl) + "\"");
  }
  for (char c : sl) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) {
      return Error("bad status line \"" + Printable(sl) + "\"");
    }
  }
  int status = (sl[9] - '0') * 100 + (sl[10] - '0') * 10 + (sl[11] - '0');
  if (status == 503) {
    Response r;
    r.kind = Response::Kind::kRetry;
    r.status = status;
    return r;
  }
  if (status != 200) return Error("unexpected status \"" + Printable(sl.substr(9)) + "\"");

  // Headers.
  size_t head_end = buf.find("\r\n\r\n", sl_end);
  if (head_end == std::string_view::npos ? buf.size() > limits.max_head : head_end + 4 > limits.max_head) {
    return Error(head_limit);
  }
  if (head_end == std::string_view::npos) {
    if (!eof) return Response{};
    return Error("truncated headers");
  }
  std::optional<uint64_t> content_length;
  std::optional<int> exit_code;
  for (size_t i = sl_end + 2; i < head_end + 2;) {
    size_t e = buf.find("\r\n", i);  // ≤ head_end
    std::string_view line = buf.substr(i, e - i);
    i = e + 2;
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos) {
      return Error("bare CR or LF in a header line");
    }
    size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return Error("bad header line \"" + Printable(line) + "\"");
    for (size_t k = 0; k < colon; ++k)
      if (!IsTchar(line[k])) return Error("bad header line \"" + Printable(line) + "\"");
    std::string name = Lower(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (name == "transfer-encoding") {
      return Error("Transfer-Encoding \"" + Printable(value) + "\" is not accepted (the agent sends Content-Length)");
    }
    if (name == "content-length") {
      if (value.empty() || value.size() > 19) return Error("bad Content-Length \"" + Printable(value) + "\"");
      uint64_t v = 0;
      for (char c : value) {
        if (!IsDigit(c)) return Error("bad Content-Length \"" + Printable(value) + "\"");
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      if (content_length && *content_length != v) return Error("conflicting Content-Length headers");
      content_length = v;
    } else if (name == "x-podwire-cni-exit") {
      int v = 0;
      bool ok = !value.empty() && value.size() <= 3;
      for (size_t k = 0; ok && k < value.size(); ++k) {
        if (IsDigit(value[k])) v = v * 10 + (value[k] - '0');
        else ok = false;
      }
      if (!ok || v > 255) return Error("bad X-Podwire-Cni-Exit \"" + Printable(value) + "\" (expected 0-255)");
      if (exit_code && *exit_code != v) return Error("conflicting X-Podwire-Cni-Exit headers");
      exit_code = v;
    }
  }
  if (!content_length) return Error("no Content-Length header");
  if (!exit_code) return Error("no X-Podwire-Cni-Exit header");
  if (*content_length > limits.max_body) {
    return Error("body of " + std::to_string(*content_length) + " bytes, over the " + std::to_string(limits.max_body) +
                 "-byte limit");
  }
  size_t body_offset = head_end + 4;
  size_t body_len = static_cast<size_t>(*content_length);
  if (buf.size() - body_offset < body_len) {
    if (!eof) {
      Response more;
      more.status = status;
      more.exit_code = *exit_code;
      more.body_offset = body_offset;
      more.body_len = body_len;
      return more;
    }
    return Error("truncated body (" + std::to_string(buf.size() - body_offset) + " of " + std::to_string(body_len) +
                 " bytes)");
  }
  Response r;
  r.kind = Response::Kind::kDone;
  r.status = status;
  r.exit_code = *exit_code;
  r.body_offset = body_offset;
  r.body_len = body_len;
  return r;
}

// ---------------------------------------------------------------- CNI output

std::string CniErrorJson(std::string_view cni_version, int code, std::string_view msg, std::string_view details) {
  std::string j = "{\"cniVersion\":";
  AppendJsonString(&j, cni_version);
  j += ",\"code\":";
  j += std::to_string(code);
  j += ",\"msg\":";
  AppendJsonString(&j, msg);
  j += ",\"details\":";
  AppendJsonString(&j, details);
  j += '}';
  return j;
}

// ---------------------------------------------------------------- agent unreachable

FallbackDecision DecideUnreachable(Command cmd, const Config& cfg, const CniArgs* args, std::string_view socket_path,
                                   std::string_view why) {
  const std::string msg = "podwire: node agent not reachable at " + std::string(socket_path);
  const std::string details = std::string(why) +
                              "; check that the podwire agent (istio-cni-node) is running on this node and serves "
                              "that socket";
  FallbackDecision d;
  auto fail = [&](Fallback a, int code) {
    d.action = a;
    d.exit_code = 1;
    d.stdout_text = CniErrorJson(ConfigCniVersion(&cfg), code, msg, details);
    d.note = msg + ": " + std::string(why);
  };
  switch (cmd) {
    case Command::kAdd: {
      const char* reason = nullptr;
      if (args) {
        bool k8s = args->pod_name && !args->pod_name->empty() && args->pod_namespace && !args->pod_namespace->empty();
        if (!k8s) {
          reason = "not a Kubernetes pod (no K8S_POD_NAME/K8S_POD_NAMESPACE in CNI_ARGS)";
        } else {
          for (const auto& ns : cfg.exclude_namespaces)
            if (ns == *args->pod_namespace) reason = "its namespace is in exclude_namespaces";
          bool own = args->pod_name->rfind("istio-cni-node-", 0) == 0 && *args->pod_namespace == cfg.pod_namespace;
          if (!reason && own) reason = "it is the node agent's own pod";
        }
      }
      if (!reason) {
        fail(Fallback::kFailTryLater, kErrTryAgainLater);
        return d;
      }
      d.action = Fallback::kPassThrough;
      d.exit_code = 0;
      if (cfg.prev_result) {
        d.stdout_text = *cfg.prev_result;
      } else {
        d.stdout_text = "{\"cniVersion\":";
        AppendJsonString(&d.stdout_text, ConfigCniVersion(&cfg));
        d.stdout_text += ",\"dns\":{}}";  // what the agent prints without a prevResult
      }
      d.note = msg + " (" + std::string(why) + "); ADD passed through: " + reason;
      return d;
    }
    case Command::kDel:
      d.action = Fallback::kQueueDel;
      d.exit_code = 0;
      d.note = msg + " (" + std::string(why) + "); DEL queued for the agent";
      return d;
    case Command::kStatus:
      if (cfg.status_always_ok) {
        d.action = Fallback::kStatusOk;
        d.exit_code = 0;
        d.note = msg + " (" + std::string(why) + "); STATUS ok (status_always_ok)";
        return d;
      }
      fail(Fallback::kFailNotAvailable, kErrPluginNotAvailable);
      return d;
    default:  // CHECK, GC (VERSION and unknown commands never get here)
      fail(Fallback::kFailTryLater, kErrTryAgainLater);
      return d;
  }
}

// ---------------------------------------------------------------- DEL queue

bool IsSafeContainerId(std::string_view id) {
  if (id.empty() || id.size() > 200) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c); };
  if (!alnum(id[0])) return false;
  for (char c : id)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

std::optional<std::string> DelRecordFileName(uint64_t unix_ms, std::string_view container_id) {
  if (!IsSafeContainerId(container_id)) return std::nullopt;
  return std::to_string(unix_ms) + "-" + std::string(container_id) + ".json";
}

std::string DelRecordTempName(std::string_view final_name, long pid, unsigned attempt) {
  return "." + std::string(final_name) + "." + std::to_string(pid) + "." + std::to_string(attempt) + ".tmp";
}

bool IsDelRecordName(std::string_view name) {
  return name.size() > 5 && name[0] != '.' && name.substr(name.size() - 5) == ".json";
}

std::string DelRecordJson(const DelRecord& r) {
  std::string j = "{\"containerId\":";
  AppendJsonString(&j, r.container_id);
  j += ",\"netns\":";
  AppendJsonString(&j, r.netns);
  j += ",\"ifname\":";
  AppendJsonString(&j, r.ifname);
  j += ",\"podNamespace\":";
  AppendJsonString(&j, r.pod_namespace);
  j += ",\"podName\":";
  AppendJsonString(&j, r.pod_name);
  j += ",\"podUid\":";
  AppendJsonString(&j, r.pod_uid);
  j += ",\"time\":";
  AppendJsonString(&j, FormatIsoTimeMs(r.unix_ms));
  j += "}\n";
  return j;
}

std::string FormatIsoTimeMs(uint64_t unix_ms) {
  // Days to civil date (Howard Hinnant's algorithm), proleptic Gregorian, UTC.
  int64_t secs = static_cast<int64_t>(unix_ms / 1000);
  int ms = static_cast<int>(unix_ms % 1000);
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  int64_t z = days + 719468;
  int64_t era = z / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03dZ", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60), ms);
  return buf;
}

}  // namespace podwire::cni
