// The one HTTP exchange with the agent (docs/cni-protocol.md "Request", "Response"): the
// request podwire-cni sends and a strict parser of the answer. Pure: no syscall.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cni-shim/config.h"

namespace podwire::cni {

inline constexpr size_t kMaxResponseBody = size_t{1} << 20;
inline constexpr size_t kMaxResponseHead = size_t{64} << 10;  // status line + headers + blank line

// {"command":…,"env":{…},"config":"<stdin>"} (docs/cni-protocol.md "Request").
std::string BuildRequestBody(std::string_view command, const std::vector<EnvVar>& env, std::string_view config);
// The request head, up to and including the blank line.
std::string BuildRequestHead(size_t body_len);

struct ResponseLimits {
  size_t max_head = kMaxResponseHead;
  size_t max_body = kMaxResponseBody;
};

struct Response {
  enum class Kind {
    kNeedMore,  // not complete yet: read more
    kDone,      // 200 with both headers and the whole body
    kRetry,     // 503: agent up but not ready
    kError,     // protocol error (`error` says what)
  };
  Kind kind = Kind::kNeedMore;
  int status = 0;
  int exit_code = 0;
  // kDone: where the body is in the buffer. kNeedMore with the head complete:
  // the same, so the caller can wait for body_offset + body_len bytes before
  // parsing again (0 otherwise).
  size_t body_offset = 0;
  size_t body_len = 0;
  std::string error;
};

// Parses what the agent sent so far (`eof`: the peer closed). The result is
// prefix-stable: once it is not kNeedMore, more bytes do not change it, so
// the caller stops reading there (bytes past the body are ignored). Strict
// HTTP/1.x: CRLF line ends, no obs-fold, no Transfer-Encoding; a 200 needs
// Content-Length (≤ max_body) and X-Podwire-Cni-Exit (0–255); a 503 is
// kRetry as soon as its status line is complete; any other status is an
// error. With `eof`, an answer cut short is an error too; the caller tells
// the two apart by parsing the same bytes without `eof` (kNeedMore: cut short).
Response ParseResponse(std::string_view buf, bool eof, const ResponseLimits& limits = {});

}  // namespace podwire::cni
