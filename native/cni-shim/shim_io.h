// The I/O half of podwire-cni: reading stdin, writing stdout, the DEL queue
// and the one HTTP exchange with the agent. Blocking only in poll() and in a
// unix connect() bounded by SO_SNDTIMEO; no threads, no signals handled.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cni-shim/shim_logic.h"

namespace podwire::cni {

// CLOCK_MONOTONIC / CLOCK_REALTIME in milliseconds.
int64_t MonotonicMs();
uint64_t UnixMs();

enum class ReadStatus { kOk, kTooBig, kError };
// Reads fd to EOF into *out; kTooBig as soon as more than `cap` bytes came.
ReadStatus ReadAll(int fd, size_t cap, std::string* out, int* err_no);
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
    kUnreachable,    // missing/refusing/not ready until agent_wait_ms, or no answer in agent_timeout_ms
    kProtocolError,  // an answer that is not the protocol
  };
  Kind kind = Kind::kUnreachable;
  int exit_code = 0;
  std::string body;
  std::string detail;  // why (for messages)
  int attempts = 0;
};

struct AgentCall {
  std::string socket_path;
  std::string_view request;  // head + body, sent as one stream
  int64_t wait_ms = 10000;     // retry budget since start (socket missing, ECONNREFUSED, 503)
  int64_t timeout_ms = 30000;  // per connection, from connect to the whole answer
  int64_t connect_timeout_ms = 1000;
  int64_t retry_interval_ms = 100;
  ResponseLimits limits;
};

AgentResult CallAgent(const AgentCall& call);

}  // namespace podwire::cni
