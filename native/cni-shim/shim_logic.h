// The pure half of podwire-cni (docs/cni-protocol.md): everything that decides
// or transforms bytes, with no syscall, so that ctest and the fuzz targets
// reach it without sockets or files. The I/O half is shim_io.h; main.cc wires
// them together.
//  - JSON: a UTF-8 validator, a string quoter (the request body, error
//    objects, DEL records) and a strict RFC 8259 reader for the stdin config
//    (top-level fields only; every other value of any type is skipped and
//    still validated).
//  - CNI_ARGS (`K=V;K=V`, Go's types.LoadArgs rules).
//  - The agent's HTTP response (status line, headers, Content-Length body).
//  - What to do when the agent is unreachable, per command.
//  - DEL queue record names and contents.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace podwire::cni {

// CNI error codes (CNI spec "Error codes") the shim reports itself.
inline constexpr int kErrInvalidEnv = 4;
inline constexpr int kErrDecode = 6;
inline constexpr int kErrInvalidConfig = 7;
inline constexpr int kErrTryAgainLater = 11;
inline constexpr int kErrPluginNotAvailable = 50;

// Limits (docs/cni-protocol.md).
inline constexpr size_t kMaxStdin = size_t{1} << 20;
inline constexpr size_t kMaxEnvValue = size_t{64} << 10;
inline constexpr size_t kMaxResponseBody = size_t{1} << 20;
inline constexpr size_t kMaxResponseHead = size_t{64} << 10;  // status line + headers + blank line
inline constexpr int kMaxJsonDepth = 512;
inline constexpr size_t kDelQueueMax = 4096;
inline constexpr int64_t kMaxConfigMs = 3'600'000;  // agent_wait_ms / agent_timeout_ms upper bound

inline constexpr std::string_view kDefaultRunDir = "/var/run/istio-cni";
inline constexpr std::string_view kSocketName = "pluginevent.sock";
inline constexpr std::string_view kDelQueueDirName = "cni-del-queue";
inline constexpr std::string_view kFallbackCniVersion = "1.1.0";
inline constexpr std::string_view kVersionReply =
    R"({"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]})";

// ---------------------------------------------------------------- JSON text

// Well-formed UTF-8 (Unicode table 3-7: no overlongs, no surrogates, ≤ U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Appends s as a JSON string literal, quotes included. `"` and `\` are
// escaped, control characters become \b \f \n \r \t or \u00xx (lowercase hex,
// like JSON.stringify), everything else is copied. Ill-formed UTF-8 bytes
// become \ufffd (as Go's encoding/json does), so the output is always valid
// JSON; callers that must be lossless check IsValidUtf8 first.
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);

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

// ---------------------------------------------------------------- stdin config

struct Config {
  std::optional<std::string> cni_version;
  std::string run_dir = std::string(kDefaultRunDir);  // no trailing '/' (root is "")
  std::vector<std::string> exclude_namespaces;
  std::string pod_namespace;
  int64_t agent_wait_ms = 10000;
  int64_t agent_timeout_ms = 30000;
  bool status_always_ok = false;
  std::optional<std::string> prev_result;  // raw JSON text of the object, verbatim
};

struct ConfigError {
  int code = 0;  // kErrDecode (not JSON) or kErrInvalidConfig (JSON, wrong shape)
  std::string msg;
};

// Parses the plugin entry the runtime gives on stdin. Malformed JSON is
// kErrDecode; a non-object, a known field of the wrong type or out of range
// is kErrInvalidConfig. Duplicate keys: the last wins (JSON.parse, which is
// what the agent uses); null means "not set".
bool ParseConfig(std::string_view text, Config* cfg, ConfigError* err);

std::string_view ConfigCniVersion(const Config* cfg);  // config's, else kFallbackCniVersion
std::string SocketPath(const Config& cfg);               // <run_dir>/pluginevent.sock

// ---------------------------------------------------------------- CNI_ARGS

struct CniArgs {
  std::optional<std::string> pod_name;
  std::optional<std::string> pod_namespace;
  std::optional<std::string> pod_uid;
  std::optional<std::string> infra_container_id;
};

// `K=V;K=V` as Go's types.LoadArgs reads it: "" is no args; every pair needs
// a '=' (an empty pair such as a trailing ';' is an error); the value is
// everything after the first '='; keys are case-sensitive, unknown ones
// (IgnoreUnknown included) are ignored; a repeated key: the last wins. On
// failure *out is left empty.
bool ParseCniArgs(std::string_view s, CniArgs* out, std::string* err);

// ---------------------------------------------------------------- environment

struct EnvVar {
  std::string name;
  std::string value;
};

// Every CNI_* entry of `envp` (environ), in order; a repeated name keeps its
// first value (what getenv returns). Returns false (CNI code 4; *err: the
// first problem) when a value is over kMaxEnvValue or an entry is not valid
// UTF-8 (it could not be sent verbatim in a JSON string); such entries are
// left out and the others are still collected, so CNI_COMMAND is known.
bool CollectCniEnv(const char* const* envp, std::vector<EnvVar>* out, std::string* err);
const EnvVar* FindEnv(const std::vector<EnvVar>& env, std::string_view name);

// ---------------------------------------------------------------- commands

enum class Command { kAdd, kDel, kCheck, kGc, kStatus, kVersion, kUnknown };
Command ParseCommand(std::string_view s);

// ---------------------------------------------------------------- request

// {"command":…,"env":{…},"config":"<stdin>"} (docs/cni-protocol.md "Request").
std::string BuildRequestBody(std::string_view command, const std::vector<EnvVar>& env, std::string_view config);
// The request head, up to and including the blank line.
std::string BuildRequestHead(size_t body_len);

// ---------------------------------------------------------------- response

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
// error.
Response ParseResponse(std::string_view buf, bool eof, const ResponseLimits& limits = {});

// ---------------------------------------------------------------- CNI output

// {"cniVersion":…,"code":…,"msg":…,"details":…}
std::string CniErrorJson(std::string_view cni_version, int code, std::string_view msg, std::string_view details);

// ---------------------------------------------------------------- agent unreachable

enum class Fallback {
  kPassThrough,     // ADD of a pod the mesh never touches: print prevResult, exit 0
  kFailTryLater,    // CNI error 11, exit 1
  kQueueDel,        // DEL: write a queue record, exit 0, no output
  kStatusOk,        // STATUS with status_always_ok: exit 0, no output
  kFailNotAvailable,  // STATUS: CNI error 50, exit 1
};

struct FallbackDecision {
  Fallback action = Fallback::kFailTryLater;
  std::string stdout_text;  // what to print (may be empty)
  int exit_code = 1;
  std::string note;  // one line for stderr, for the runtime's log
};

// `args` is null when CNI_ARGS did not parse (such an ADD fails closed).
// `why` says what happened (goes into the error's details).
FallbackDecision DecideUnreachable(Command cmd, const Config& cfg, const CniArgs* args, std::string_view socket_path,
                                   std::string_view why);

// ---------------------------------------------------------------- DEL queue

struct DelRecord {
  std::string container_id, netns, ifname, pod_namespace, pod_name, pod_uid;
  uint64_t unix_ms = 0;
};

// libcni's container ID rule (^[A-Za-z0-9][A-Za-z0-9_.-]*$), ≤ 200 bytes.
bool IsSafeContainerId(std::string_view id);
// "<unix ms>-<container id>.json", or nullopt when the ID is not safe as a file name.
std::optional<std::string> DelRecordFileName(uint64_t unix_ms, std::string_view container_id);
// The temp name the record is written under before the rename (not counted as a record).
std::string DelRecordTempName(std::string_view final_name, long pid, unsigned attempt);
// A queue entry that counts towards kDelQueueMax: a name ending ".json" that is not hidden.
bool IsDelRecordName(std::string_view name);
inline bool DelQueueHasRoom(size_t records) { return records < kDelQueueMax; }
// {"containerId":…,"netns":…,"ifname":…,"podNamespace":…,"podName":…,"podUid":…,
//  "time":"<RFC 3339 UTC, ms>"} and a newline.
std::string DelRecordJson(const DelRecord& r);
// 2026-12-01T11:21:33.393Z (what JavaScript's Date#toISOString prints).
std::string FormatIsoTimeMs(uint64_t unix_ms);

}  // namespace podwire::cni
