// libFuzzer target for podwire-cni's reader of the agent's HTTP answer
// (ParseResponse in native/cni-shim/http_response.h). Input: one byte choosing
// the limits (the real 64 KiB head / 1 MiB body, or small ones so that a
// 4 KiB input reaches them), one byte seeding the chunking, then the bytes
// the agent sent.
//  - eof only turns "need more" into an error; a decided result is the same
//    with or without eof.
//  - Prefix stability: fed in random chunks (as recv hands them), the first
//    decided result equals the result on the whole input (so the shim may
//    stop reading there); a "need more" hint never asks for fewer bytes than
//    it has.
//  - A 200 result is checked against the bytes: status line "HTTP/1.x 200",
//    the body starts right after the first CRLFCRLF, lies inside the input,
//    is within the limits, and the head carries Content-Length and
//    X-Podwire-Cni-Exit and no Transfer-Encoding (compared case-insensitively
//    by a plain scan); a 503 starts with "HTTP/1.x 503"; an error says what.
// Build and run: scripts/fuzz.sh SECONDS cni_response_fuzz.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cni-shim/http_response.h"

using namespace podwire::cni;

namespace {

#define REQUIRE(cond)                                                           \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "cni_response_fuzz: invariant failed: %s\n", #cond);  \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

bool Same(const Response& a, const Response& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Response::Kind::kNeedMore) return true;
  return a.status == b.status && a.exit_code == b.exit_code && a.body_offset == b.body_offset &&
         a.body_len == b.body_len && a.error == b.error;
}

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  ResponseLimits lim;
  if (data[0] & 1) {
    lim.max_head = 8 + (data[0] >> 1) * 4;  // 8..516
    lim.max_body = (data[0] >> 3) * 16;     // 0..496
  }
  uint32_t seed = data[1] | 0x100u;
  std::string_view in(reinterpret_cast<const char*>(data + 2), size - 2);

  Response whole = ParseResponse(in, false, lim);
  Response whole_eof = ParseResponse(in, true, lim);
  if (whole.kind == Response::Kind::kNeedMore) {
    REQUIRE(whole_eof.kind == Response::Kind::kError);
    if (whole.body_len) REQUIRE(whole.body_offset + whole.body_len > in.size());
  } else {
    REQUIRE(Same(whole, whole_eof));
  }

  // The same bytes in chunks: the first decided result is the whole input's.
  bool decided = false;
  for (size_t fed = 0; fed < in.size();) {
    seed = seed * 1103515245u + 12345u;
    fed += 1 + (seed >> 16) % 97;
    if (fed > in.size()) fed = in.size();
    Response r = ParseResponse(in.substr(0, fed), false, lim);
    if (r.kind == Response::Kind::kNeedMore) {
      if (r.body_len) REQUIRE(r.body_offset + r.body_len > fed);
      continue;
    }
    REQUIRE(Same(r, whole));
    decided = true;
    break;
  }
  if (!decided) REQUIRE(whole.kind == Response::Kind::kNeedMore);

  switch (whole.kind) {
    case Response::Kind::kDone: {
      REQUIRE(whole.status == 200);
      REQUIRE(whole.exit_code >= 0 && whole.exit_code <= 255);
      REQUIRE(whole.body_len <= lim.max_body);
      REQUIRE(whole.body_offset <= lim.max_head);
      REQUIRE(whole.body_offset >= 4 && whole.body_offset + whole.body_len <= in.size());
      REQUIRE(in.substr(0, 7) == "HTTP/1." && (in.substr(8, 5) == " 200 " || in.substr(8, 6) == " 200\r\n"));
      REQUIRE(in.find("\r\n\r\n") == whole.body_offset - 4);
      std::string head = Lower(in.substr(0, whole.body_offset));
      REQUIRE(head.find("\r\ncontent-length:") != std::string::npos);
      REQUIRE(head.find("\r\nx-podwire-cni-exit:") != std::string::npos);
      REQUIRE(head.find("\r\ntransfer-encoding:") == std::string::npos);
      break;
    }
    case Response::Kind::kRetry:
      REQUIRE(whole.status == 503);
      REQUIRE(in.substr(0, 7) == "HTTP/1." && in.substr(8, 4) == " 503");
      break;
    case Response::Kind::kError:
      REQUIRE(!whole.error.empty());
      break;
    case Response::Kind::kNeedMore:
      break;
  }
  return 0;
}
