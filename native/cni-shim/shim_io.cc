// The I/O half of podwire-cni; see shim_io.h.
#include "cni-shim/shim_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/fd.h"

namespace podwire::cni {

namespace {

std::string Errno(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

// mkdir that accepts an existing directory.
bool EnsureDir(const std::string& path, mode_t mode, std::string* err) {
  if (::mkdir(path.c_str(), mode) == 0) return true;
  int e = errno;
  if (e == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
    *err = path + " exists and is not a directory";
    return false;
  }
  *err = Errno(("mkdir " + path).c_str(), e);
  return false;
}

// Waits until fd is ready for `events` or the monotonic deadline passes.
// Returns 1 ready, 0 timed out, -1 error (errno set).
int PollUntil(int fd, short events, int64_t deadline_ms) {
  for (;;) {
    int64_t left = deadline_ms - MonotonicMs();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left > 60'000 ? 60'000 : left));
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

void SleepMs(int64_t ms) {
  int64_t until = MonotonicMs() + ms;
  for (int64_t left = ms; left > 0; left = until - MonotonicMs()) ::poll(nullptr, 0, static_cast<int>(left));
}

struct Attempt {
  AgentResult result;
  bool retry = false;  // the agent is absent or not ready: try again while the wait budget lasts
};

using Cause = AgentResult::Cause;

Attempt Unreachable(Cause cause, std::string detail, bool retry) {
  Attempt a;
  a.result.kind = AgentResult::Kind::kUnreachable;
  a.result.cause = cause;
  a.result.detail = std::move(detail);
  a.retry = retry;
  return a;
}

Attempt Protocol(std::string detail) {
  Attempt a;
  a.result.kind = AgentResult::Kind::kProtocolError;
  a.result.detail = std::move(detail);
  return a;
}

Attempt Once(const AgentCall& c) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Unreachable(Cause::kOther, Errno("socket", errno), false);

  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (c.socket_path.size() >= sizeof sun.sun_path) return Unreachable(Cause::kOther, "socket path too long", false);
  std::memcpy(sun.sun_path, c.socket_path.data(), c.socket_path.size());

  // A unix connect only blocks while the listener's backlog is full; SO_SNDTIMEO bounds that wait
  // (the kernel then fails it with EAGAIN).
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(c.connect_timeout_ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((c.connect_timeout_ms % 1000) * 1000);
  ::setsockopt(s.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&sun), sizeof sun) != 0) {
    int e = errno;
    switch (e) {
      case ENOENT:
        return Unreachable(Cause::kNoSocket, "no socket there (connect: No such file or directory)", true);
      case ECONNREFUSED:
        return Unreachable(Cause::kRefused, "nothing listening (connect: Connection refused)", true);
      case EAGAIN:
      case EINTR:
        return Unreachable(Cause::kBacklogFull, "connect timed out after " + std::to_string(c.connect_timeout_ms) +
                               " ms (the agent's backlog is full)",
                           true);
      default:
        return Unreachable(Cause::kOther, Errno("connect", e), false);
    }
  }
  int fl = ::fcntl(s.get(), F_GETFL);
  if (fl < 0 || ::fcntl(s.get(), F_SETFL, fl | O_NONBLOCK) != 0) return Unreachable(Cause::kOther, Errno("fcntl", errno), false);

  const int64_t deadline = MonotonicMs() + c.timeout_ms;
  const std::string no_answer =
      "connected, but no complete answer within " + std::to_string(c.timeout_ms) + " ms (agent_timeout_ms)";

  // Send the request. A peer that closes early may still have answered (a 503, say): read then.
  int send_errno = 0;
  for (size_t off = 0; off < c.request.size();) {
    ssize_t n = ::send(s.get(), c.request.data() + off, c.request.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = PollUntil(s.get(), POLLOUT, deadline);
      if (r == 0) return Unreachable(Cause::kTimeout, no_answer, false);
      if (r < 0) return Protocol(Errno("poll", errno));
      continue;
    }
    send_errno = n < 0 ? errno : EPIPE;
    break;
  }

  // Read until the answer is complete (then stop: the agent closes anyway), the peer closes, or the deadline.
  std::string buf;
  bool eof = false;
  size_t need = 0;  // bytes the buffer must hold before parsing again is worth it
  char chunk[64 * 1024];
  for (;;) {
    if (eof || buf.size() >= need) {
      Response r = ParseResponse(buf, eof, c.limits);
      switch (r.kind) {
        case Response::Kind::kDone: {
          Attempt a;
          a.result.kind = AgentResult::Kind::kAnswered;
          a.result.exit_code = r.exit_code;
          a.result.body.assign(buf, r.body_offset, r.body_len);
          return a;
        }
        case Response::Kind::kRetry:
          return Unreachable(Cause::kNotReady, "the agent is not ready yet (503 Service Unavailable)", true);
        case Response::Kind::kError:
          // Closed or reset before a complete answer (what is there is a valid beginning of
          // one): the agent went away mid-request, it did not answer wrongly.
          if (eof && ParseResponse(buf, false, c.limits).kind == Response::Kind::kNeedMore) {
            std::string how = buf.empty() ? (send_errno ? Errno("while sending the request", send_errno)
                                                        : std::string("before answering"))
                                          : "after " + std::to_string(buf.size()) + " bytes of the answer (" + r.error + ")";
            return Unreachable(Cause::kGone, "the agent closed the connection " + how, true);
          }
          return Protocol(r.error);
        case Response::Kind::kNeedMore:
          need = r.body_len ? r.body_offset + r.body_len : buf.size() + 1;
          break;
      }
    }
    int p = PollUntil(s.get(), POLLIN, deadline);
    if (p == 0) return Unreachable(Cause::kTimeout, no_answer, false);
    if (p < 0) return Protocol(Errno("poll", errno));
    ssize_t n = ::recv(s.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      eof = true;
    } else if (errno == ECONNRESET) {
      eof = true;  // parsed as a truncated answer
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Protocol(Errno("recv", errno));
    }
  }
}

}  // namespace

int64_t MonotonicMs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

uint64_t UnixMs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec / 1'000'000);
}

ReadStatus ReadAll(int fd, size_t cap, std::string* out, int* err_no, int64_t timeout_ms) {
  out->clear();
  char chunk[64 * 1024];
  const int64_t deadline = timeout_ms >= 0 ? MonotonicMs() + timeout_ms : 0;
  for (;;) {
    if (timeout_ms >= 0) {
      // poll() first: a read on a pipe whose writer never closes would block past any deadline.
      int p = PollUntil(fd, POLLIN, deadline);
      if (p == 0) return ReadStatus::kTimeout;
      if (p < 0) {
        if (err_no) *err_no = errno;
        return ReadStatus::kError;
      }
    }
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return ReadStatus::kOk;
    if (n < 0) {
      if (errno == EINTR || (errno == EAGAIN && timeout_ms >= 0)) continue;  // EAGAIN: non-blocking, poll() again
      if (err_no) *err_no = errno;
      return ReadStatus::kError;
    }
    if (out->size() + static_cast<size_t>(n) > cap) return ReadStatus::kTooBig;
    out->append(chunk, static_cast<size_t>(n));
  }
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

QueueResult WriteDelRecord(const std::string& run_dir, const DelRecord& rec, size_t max_records) {
  QueueResult res;
  auto fail = [&](std::string detail) {
    res.status = QueueStatus::kError;
    res.detail = std::move(detail);
    return res;
  };
  std::optional<std::string> name = DelRecordFileName(rec.unix_ms, rec.container_id);
  if (!name) {
    res.status = QueueStatus::kBadContainerId;
    res.detail = "CNI_CONTAINERID is not a valid container ID";
    return res;
  }
  const std::string qdir = run_dir + "/" + std::string(kDelQueueDirName);
  std::string err;
  if (!run_dir.empty() && !EnsureDir(run_dir, 0750, &err)) return fail(err);
  if (!EnsureDir(qdir, 0700, &err)) return fail(err);
  UniqueFd dir(::open(qdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dir.valid()) return fail(Errno(("open " + qdir).c_str(), errno));

  // Count the records (an independent open file description, owned by the DIR stream).
  {
    UniqueFd scan(::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!scan.valid()) return fail(Errno(("open " + qdir).c_str(), errno));
    UniqueDir d(::fdopendir(scan.get()));
    if (!d) return fail(Errno(("fdopendir " + qdir).c_str(), errno));
    scan.release();  // closedir closes it
    size_t records = 0;
    errno = 0;
    while (dirent* e = ::readdir(d.get())) {
      if (IsDelRecordName(e->d_name)) ++records;
    }
    if (errno != 0) return fail(Errno(("readdir " + qdir).c_str(), errno));
    if (records >= max_records) {
      res.status = QueueStatus::kFull;
      res.detail = qdir + " holds " + std::to_string(records) + " records (the limit)";
      return res;
    }
  }

  const std::string body = DelRecordJson(rec);
  std::string tmp;
  UniqueFd f;
  for (unsigned attempt = 0; attempt < 16 && !f.valid(); ++attempt) {
    tmp = DelRecordTempName(*name, static_cast<long>(::getpid()), attempt);
    f.reset(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!f.valid() && errno != EEXIST) return fail(Errno(("create " + qdir + "/" + tmp).c_str(), errno));
  }
  if (!f.valid()) return fail("create " + qdir + "/" + tmp + ": every temp name is taken");
  auto drop_tmp = [&](std::string detail) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return fail(std::move(detail));
  };
  if (!WriteAll(f.get(), body)) return drop_tmp(Errno(("write " + qdir + "/" + tmp).c_str(), errno));
  if (::fsync(f.get()) != 0) return drop_tmp(Errno(("fsync " + qdir + "/" + tmp).c_str(), errno));
  if (::close(f.release()) != 0) return drop_tmp(Errno(("close " + qdir + "/" + tmp).c_str(), errno));
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name->c_str()) != 0) {
    return drop_tmp(Errno(("rename to " + qdir + "/" + *name).c_str(), errno));
  }
  ::fsync(dir.get());  // the rename itself; best effort (the record is already complete)
  res.status = QueueStatus::kWritten;
  res.detail = qdir + "/" + *name;
  return res;
}

AgentResult CallAgent(const AgentCall& c) {
  const int64_t start = c.start_ms >= 0 ? c.start_ms : MonotonicMs();
  const int64_t wait_deadline = start + c.wait_ms;
  if (c.attempts_before > 0) {  // continuing an earlier call: the pause it did not make
    int64_t left = wait_deadline - MonotonicMs();
    if (left > 0) SleepMs(left < c.retry_interval_ms ? left : c.retry_interval_ms);
  }
  for (int n = 1;; ++n) {
    const int attempt = c.attempts_before + n;
    Attempt a = Once(c);
    a.result.attempts = attempt;
    if (!a.retry || (c.max_attempts > 0 && n >= c.max_attempts)) return a.result;
    int64_t left = wait_deadline - MonotonicMs();
    if (left <= 0) {
      a.result.detail += "; gave up after " + std::to_string(MonotonicMs() - start) + " ms and " +
                         std::to_string(attempt) + (attempt == 1 ? " attempt" : " attempts") + " (agent_wait_ms " +
                         std::to_string(c.wait_ms) + ")";
      return a.result;
    }
    SleepMs(left < c.retry_interval_ms ? left : c.retry_interval_ms);
  }
}

}  // namespace podwire::cni
