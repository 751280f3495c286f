// libFuzzer target for podwire-cni's JSON handling (native/cni-shim/json.h,
// config.h, cni_result.h): the input is what the runtime writes on stdin
// (and, for the last checks, a CNI_ARGS value).
//  - ParseConfig fails with code 6 exactly when JsonValidate rejects the
//    text, otherwise it succeeds or fails with code 7; an error offset lies
//    inside the input.
//  - An accepted config is in range: an absolute run dir without trailing
//    '/' or NUL, wait/timeout within bounds, prevResult a substring of the
//    input that is itself one valid JSON object, every decoded string valid
//    UTF-8 and unchanged by JsonString → JsonUnquote.
//  - JsonString of the raw input is always valid JSON and UTF-8, and decodes
//    back to the input when that is valid UTF-8.
//  - IsValidUtf8 agrees with a reference decoder written from the bit
//    patterns (overlongs, surrogates, > U+10FFFF rejected).
//  - JsonUnquote succeeding implies JsonValidate does, and gives UTF-8.
//  - ParseCniArgs: each value it returns is a substring of the input.
//  - The pass-through result of an accepted config's prevResult, in every
//    supported version, is valid JSON and UTF-8, or an error with a message.
// Build and run: scripts/fuzz.sh SECONDS cni_config_fuzz.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cni-shim/cni_result.h"
#include "cni-shim/config.h"
#include "cni-shim/json.h"

using namespace podwire::cni;

namespace {

#define REQUIRE(cond)                                                         \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "cni_config_fuzz: invariant failed: %s\n", #cond);  \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

bool RefUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      n = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      n = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      n = 4, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void RoundTrip(const std::string& s) {
  REQUIRE(IsValidUtf8(s));
  std::string back;
  JsonError e;
  REQUIRE(JsonUnquote(JsonString(s), &back, &e));
  REQUIRE(back == s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  JsonError je;
  bool valid = JsonValidate(in, &je);
  if (!valid) REQUIRE(je.offset <= size && !je.what.empty());
  Config c;
  ConfigError ce;
  bool ok = ParseConfig(in, &c, &ce);
  if (!valid) REQUIRE(!ok && ce.code == kErrDecode);
  // Valid JSON fails only on shape: 7 for a known field of the wrong type, 6 when it is not a
  // configuration at all (not an object, or a prevResult that is not one), as the agent answers.
  if (valid) REQUIRE(ok || ce.code == kErrInvalidConfig || ce.code == kErrDecode);
  if (!ok) REQUIRE(!ce.msg.empty());
  if (ok) {
    REQUIRE(c.run_dir.empty() || (c.run_dir[0] == '/' && c.run_dir.back() != '/'));
    REQUIRE(c.run_dir.find('\0') == std::string::npos);
    REQUIRE(c.agent_wait_ms >= 0 && c.agent_wait_ms <= kMaxConfigMs);
    REQUIRE(c.agent_timeout_ms >= 1 && c.agent_timeout_ms <= kMaxConfigMs);
    if (c.prev_result) {
      REQUIRE(!c.prev_result->empty() && (*c.prev_result)[0] == '{');
      REQUIRE(in.find(*c.prev_result) != std::string_view::npos);
      JsonError pe;
      REQUIRE(JsonValidate(*c.prev_result, &pe));
    }
    if (c.cni_version) RoundTrip(*c.cni_version);
    RoundTrip(c.run_dir);
    RoundTrip(c.pod_namespace);
    for (const auto& ns : c.exclude_namespaces) RoundTrip(ns);
    if (c.pod_annotation_keys)
      for (const auto& k : *c.pod_annotation_keys) RoundTrip(k);
    for (std::string_view v : kSupportedVersions) {
      std::string out, err;
      if (PassThroughResult(c.prev_result, v, &out, &err)) {
        JsonError oe;
        REQUIRE(IsValidUtf8(out) && JsonValidate(out, &oe) && err.empty());
      } else {
        REQUIRE(!err.empty() && c.prev_result);
      }
    }
  }

  const bool utf8 = IsValidUtf8(in);
  REQUIRE(utf8 == RefUtf8(in));
  std::string q = JsonString(in);
  REQUIRE(IsValidUtf8(q));
  JsonError qe;
  REQUIRE(JsonValidate(q, &qe));
  std::string back;
  REQUIRE(JsonUnquote(q, &back, &qe));
  if (utf8) REQUIRE(back == in);

  std::string un;
  JsonError ue;
  if (JsonUnquote(in, &un, &ue)) {
    REQUIRE(valid);
    REQUIRE(IsValidUtf8(un));
  }

  CniArgs a;
  std::string aerr;
  if (ParseCniArgs(in, &a, &aerr)) {
    for (const auto* v : {&a.pod_name, &a.pod_namespace, &a.pod_uid, &a.infra_container_id}) {
      if (*v) REQUIRE(in.find(**v) != std::string_view::npos);
    }
  } else {
    REQUIRE(!aerr.empty());
  }
  return 0;
}
