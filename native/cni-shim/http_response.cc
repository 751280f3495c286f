// The HTTP exchange with the agent; see http_response.h.
#include "cni-shim/http_response.h"

#include <cstdint>
#include <cstring>
#include <optional>

#include "cni-shim/json.h"

namespace podwire::cni {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

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

Response Error(std::string what) {
  Response r;
  r.kind = Response::Kind::kError;
  r.error = std::move(what);
  return r;
}

}  // namespace

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
  // The status line's fixed part ("HTTP/1.x DDD"), as far as it came: bytes that can never
  // begin an answer are an error now, not a wait for more (the message quotes only the bytes up
  // to the first wrong one, so it is the same however the answer is split).
  static constexpr std::string_view kTemplate = "HTTP/1.# ###";
  for (size_t k = 0; k < kTemplate.size() && k < buf.size() && k < limits.max_head; ++k) {
    bool ok = kTemplate[k] == '#' ? IsDigit(buf[k]) : buf[k] == kTemplate[k];
    if (!ok) return Error("bad status line \"" + Printable(buf.substr(0, k + 1)) + "\"");
  }
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

}  // namespace podwire::cni
