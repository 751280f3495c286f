// JSON for podwire-cni, no allocation beyond what the caller asks for: a UTF-8 validator, a
// string quoter (JSON.stringify's escapes, and Go's for the results upstream prints), a strict
// RFC 8259 cursor (JsonReader) the config and decision-file parsers walk, and a small tree
// (JsonValue) for the prevResult and the decision file. Pure: no syscall.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podwire::cni {

inline constexpr int kMaxJsonDepth = 512;

// Well-formed UTF-8 (Unicode table 3-7: no overlongs, no surrogates, ≤ U+10FFFF).
bool IsValidUtf8(std::string_view s);
// Length of the well-formed UTF-8 sequence at s[i] (lead byte ≥ 0x80), or 0.
size_t Utf8SeqLen(std::string_view s, size_t i);

// Appends s as a JSON string literal, quotes included. `"` and `\` are
// escaped, control characters become \b \f \n \r \t or \u00xx (lowercase hex,
// like JSON.stringify), everything else is copied. Ill-formed UTF-8 bytes
// become \ufffd (as Go's encoding/json does), so the output is always valid
// JSON; callers that must be lossless check IsValidUtf8 first.
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);
// The same as Go's encoding/json writes it: also <, >, & and U+2028/U+2029 as \u escapes.
void AppendGoJsonString(std::string* out, std::string_view s);

// Printable ASCII copy of s, at most max bytes (for error messages quoting a peer).
std::string Printable(std::string_view s, size_t max = 64);

struct JsonError {
  size_t offset = 0;
  std::string what;
};

// True when `text` is exactly one JSON value with optional surrounding
// whitespace (RFC 8259; strings must be UTF-8, nesting ≤ kMaxJsonDepth).
bool JsonValidate(std::string_view text, JsonError* err);

// Decodes `literal`, which must be exactly one JSON string literal (quotes
// included). \u escapes become UTF-8, surrogate pairs are joined; a lone
// surrogate becomes U+FFFD (Go's behaviour), so the result is valid UTF-8.
bool JsonUnquote(std::string_view literal, std::string* out, JsonError* err);

// A cursor over JSON text. Every method leaves the first error (offset +
// what) in error() and returns false; values are never built except the
// strings a caller asks for.
class JsonReader {
 public:
  explicit JsonReader(std::string_view t) : t_(t) {}

  size_t pos() const { return p_; }
  bool AtEnd() const { return p_ >= t_.size(); }
  char Peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  const JsonError& error() const { return err_; }
  std::string_view text() const { return t_; }

  bool Fail(const char* what);
  void Ws();
  bool Expect(char c, const char* what);
  // A string literal at pos(); decoded into *out unless out is null.
  bool String(std::string* out);
  // The text of a number at pos() (RFC 8259 grammar); *is_int: no fraction or exponent.
  bool Number(std::string_view* text, bool* is_int);
  // Skips (and validates) one value at pos(), nested at most kMaxJsonDepth deep.
  bool Value(int depth = 0);
  bool Literal(std::string_view word);
  bool StartsLiteral(std::string_view word) const { return t_.substr(p_, word.size()) == word; }

 private:
  bool Hex4(uint32_t* v);
  bool Escape(std::string* out);

  std::string_view t_;
  size_t p_ = 0;
  bool failed_ = false;
  JsonError err_;
};

// One parsed value. Objects keep every member in input order, duplicates included.
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;                // kString: the decoded string; kNumber: the literal
  std::vector<JsonValue> items;    // kArray: the elements; kObject: the member values
  std::vector<std::string> keys;   // kObject: the member keys (keys[i] names items[i])

  bool is(Kind k) const { return kind == k; }
  // kObject: the value of the last member named `key`, or null.
  const JsonValue* Get(std::string_view key) const;
};

// Parses exactly one JSON value (same rules as JsonValidate).
bool JsonParse(std::string_view text, JsonValue* out, JsonError* err);

// int64 from an integer literal (no fraction or exponent), false when out of range.
bool JsonInt(const JsonValue& v, int64_t* out);

}  // namespace podwire::cni
