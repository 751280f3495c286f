// JSON text for podwire-cni; see json.h.
#include "cni-shim/json.h"

#include <cstdint>

namespace podwire::cni {

namespace {

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

}  // namespace

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


// ---------------------------------------------------------------- JsonReader

bool JsonReader::Fail(const char* what) {
  if (!failed_) {
    failed_ = true;
    err_.offset = p_;
    err_.what = what;
  }
  return false;
}

void JsonReader::Ws() {
  while (p_ < t_.size()) {
    char c = t_[p_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++p_;
  }
}

bool JsonReader::Expect(char c, const char* what) {
  if (Peek() != c || AtEnd()) return Fail(what);
  ++p_;
  return true;
}

// A string literal at p_; decoded into *out unless out is null.
bool JsonReader::String(std::string* out) {
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
bool JsonReader::Number(std::string_view* text, bool* is_int) {
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
bool JsonReader::Value(int depth) {
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

bool JsonReader::Literal(std::string_view word) {
  if (t_.substr(p_, word.size()) != word) return Fail("invalid literal");
  p_ += word.size();
  return true;
}


bool JsonReader::Hex4(uint32_t* v) {
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
bool JsonReader::Escape(std::string* out) {
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
  JsonReader r(text);
  bool ok = r.Value();
  if (ok) {
    r.Ws();
    if (!r.AtEnd()) ok = r.Fail("unexpected data after the JSON value");
  }
  if (!ok && err) *err = r.error();
  return ok;
}

bool JsonUnquote(std::string_view literal, std::string* out, JsonError* err) {
  JsonReader r(literal);
  bool ok = r.String(out);
  if (ok && !r.AtEnd()) ok = r.Fail("unexpected data after the string");
  if (!ok && err) *err = r.error();
  return ok;
}
void AppendGoJsonString(std::string* out, std::string_view s) {
  // JsonString's escapes plus Go's HTML-safe set; the input is valid UTF-8 here (parsed text).
  std::string plain;
  AppendJsonString(&plain, s);
  out->reserve(out->size() + plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    char c = plain[i];
    if (c == '<') out->append("\\u003c");
    else if (c == '>') out->append("\\u003e");
    else if (c == '&') out->append("\\u0026");
    else if (c == '\xE2' && i + 2 < plain.size() && plain[i + 1] == '\x80' && (plain[i + 2] == '\xA8' || plain[i + 2] == '\xA9')) {
      out->append(plain[i + 2] == '\xA8' ? "\\u2028" : "\\u2029");
      i += 2;
    } else {
      out->push_back(c);
    }
  }
}

std::string Printable(std::string_view s, size_t max) {
  std::string r;
  for (char c : s.substr(0, max)) r.push_back(c >= 0x20 && c < 0x7F ? c : '?');
  if (s.size() > max) r += "...";
  return r;
}

// ---------------------------------------------------------------- JsonValue

const JsonValue* JsonValue::Get(std::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  for (size_t i = keys.size(); i-- > 0;)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

namespace {

// Builds the tree from text JsonValidate accepted (so no step here can fail but depth).
bool Build(JsonReader* r, JsonValue* v, int depth) {
  r->Ws();
  char c = r->Peek();
  if (c == '{' || c == '[') {
    if (depth >= kMaxJsonDepth) return r->Fail("nested too deeply");
    const bool obj = c == '{';
    v->kind = obj ? JsonValue::Kind::kObject : JsonValue::Kind::kArray;
    r->Expect(c, "");
    r->Ws();
    const char close = obj ? '}' : ']';
    bool first = true;
    while (r->Peek() != close) {
      if (!first) {
        r->Expect(',', "");
        r->Ws();
      }
      first = false;
      if (obj) {
        v->keys.emplace_back();
        if (!r->String(&v->keys.back())) return false;
        r->Ws();
        r->Expect(':', "");
      }
      v->items.emplace_back();
      if (!Build(r, &v->items.back(), depth + 1)) return false;
      r->Ws();
    }
    return r->Expect(close, "");
  }
  if (c == '"') {
    v->kind = JsonValue::Kind::kString;
    return r->String(&v->text);
  }
  if (c == 't' || c == 'f') {
    v->kind = JsonValue::Kind::kBool;
    v->boolean = c == 't';
    return r->Literal(c == 't' ? "true" : "false");
  }
  if (c == 'n') {
    v->kind = JsonValue::Kind::kNull;
    return r->Literal("null");
  }
  v->kind = JsonValue::Kind::kNumber;
  std::string_view num;
  if (!r->Number(&num, nullptr)) return false;
  v->text = std::string(num);
  return true;
}

}  // namespace

bool JsonParse(std::string_view text, JsonValue* out, JsonError* err) {
  *out = JsonValue{};
  if (!JsonValidate(text, err)) return false;
  JsonReader r(text);
  if (!Build(&r, out, 0)) {
    if (err) *err = r.error();
    return false;
  }
  return true;
}

bool JsonInt(const JsonValue& v, int64_t* out) {
  if (v.kind != JsonValue::Kind::kNumber) return false;
  std::string_view t = v.text;
  bool neg = !t.empty() && t[0] == '-';
  if (neg) t.remove_prefix(1);
  if (t.empty()) return false;
  uint64_t r = 0;
  const uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : t) {
    if (c < '0' || c > '9') return false;  // a fraction or an exponent
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (r > (limit - d) / 10) return false;
    r = r * 10 + d;
  }
  *out = neg ? static_cast<int64_t>(0 - r) : static_cast<int64_t>(r);
  return true;
}

}  // namespace podwire::cni
