// The I/O half of podwire-cni: reading stdin, writing stdout, the DEL queue
// and the one HTTP exchange with the agent. Blocking only in poll() and in a
// unix connect() bounded by SO_SNDTIMEO; no threads, no signals handled.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cni-shim/del_queue.h"
#include "cni-shim/http_response.h"

namespace podwire::cni {

// CLOCK_MONOTONIC / CLOCK_REALTIME in milliseconds.
int64_t MonotonicMs();
uint64_t UnixMs();

enum class ReadStatus { kOk, kTooBig, kError, kTimeout };
// Reads fd to EOF into *out; kTooBig as soon as more than `cap` bytes came. With timeout_ms
// ≥ 0, kTimeout when EOF has not come that long after the call (waits in poll(), so a pipe
// whose writer never closes cannot hold the caller).
ReadStatus ReadAll(int fd, size_t cap, std::string* out, int* err_no, int64_t timeout_ms = -1);
// Writes all of data (retrying short writes and EINTR).
bool WriteAll(int fd, std::string_view data);

enum class QueueStatus { kWritten, kFull, kBadContainerId, kError };
struct QueueResult {
  QueueStatus status = QueueStatus::kError;
  std::string detail;  // the record's path, or what failed
};
// Writes one record into <run_dir>/cni-del-queue/ (run dir made 0750 and
// queue dir 0700 when missing): counts the records first (kFull at
// kDelQueueMax), then writes a hidden temp file opened O_CREAT|O_EXCL,
// fsyncs it, renames it to its final name and fsyncs the directory. Every
// name is resolved relative to the queue dir's fd (no symlink followed at
// the last component). `max_records` is for tests.
QueueResult WriteDelRecord(const std::string& run_dir, const DelRecord& rec, size_t max_records = kDelQueueMax);

struct AgentResult {
  enum class Kind {
    kAnswered,       // a complete 200: exit_code + body
    kUnreachable,    // missing/refusing/not ready/gone until agent_wait_ms, or no answer in agent_timeout_ms
    kProtocolError,  // a complete answer, or bytes that can never become one, that is not the protocol
  };
  // Why it is unreachable (kUnreachable only).
  enum class Cause {
    kNone,
    kNoSocket,     // connect: ENOENT
    kRefused,      // connect: ECONNREFUSED (a socket file nobody listens on)
    kNotReady,     // 503
    kGone,         // the connection was closed or reset before a complete answer (the agent died mid-request)
    kBacklogFull,  // connect timed out: the agent is alive but does not accept
    kTimeout,      // connected, no complete answer within agent_timeout_ms
    kOther,        // another socket error
  };
  Kind kind = Kind::kUnreachable;
  Cause cause = Cause::kNone;
  int exit_code = 0;
  std::string body;
  std::string detail;  // why (for messages)
  int attempts = 0;
};

// The agent is down (or not up yet) rather than busy: what lets the shim consult the decision
// file for an ADD (docs/cni-protocol.md).
inline bool AgentDown(const AgentResult& r) {
  using C = AgentResult::Cause;
  return r.kind == AgentResult::Kind::kUnreachable &&
         (r.cause == C::kNoSocket || r.cause == C::kRefused || r.cause == C::kNotReady || r.cause == C::kGone);
}

struct AgentCall {
  std::string socket_path;
  std::string_view request;  // head + body, sent as one stream
  int64_t wait_ms = 10000;     // retry budget since start_ms (socket missing, refused, 503, gone, backlog full)
  int64_t start_ms = -1;       // MonotonicMs() the budget counts from (-1: the call's start)
  int max_attempts = 0;        // stop after this many (0: until the budget is spent)
  int attempts_before = 0;     // attempts an earlier call already made (for the message)
  int64_t timeout_ms = 30000;  // per connection, from connect to the whole answer
  int64_t connect_timeout_ms = 1000;
  int64_t retry_interval_ms = 100;
  ResponseLimits limits;
};

AgentResult CallAgent(const AgentCall& call);

}  // namespace podwire::cni
