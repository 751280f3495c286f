#include "unix_ops.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace podwire::sock {
namespace {

ErrorInfo Fail(const char* op, const std::string& what) {
  int e = errno;
  return ErrorInfo::Errno(e, op, what + ": " + std::strerror(e));
}

}  // namespace

bool MakeAddr(const std::string& name, sockaddr_un* addr, socklen_t* len, ErrorInfo* err) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  bool abstract = !name.empty() && name[0] == '@';
  size_t n = name.size();
  if (n == 0 || (abstract && n == 1)) {
    *err = ErrorInfo::Errno(EINVAL, "socket-address", "empty unix socket name");
    return false;
  }
  if (name.find('\0') != std::string::npos) {
    *err = ErrorInfo::Errno(EINVAL, "socket-address", "unix socket name contains a NUL byte");
    return false;
  }
  // A path needs its terminating NUL inside sun_path; an abstract name uses
  // every byte (the leading '@' becomes the leading NUL).
  if (n > sizeof(addr->sun_path) - (abstract ? 0 : 1)) {
    *err = ErrorInfo::Errno(ENAMETOOLONG, "socket-address",
                            "unix socket name longer than " + std::to_string(sizeof(addr->sun_path) - 1) + " bytes");
    return false;
  }
  std::memcpy(addr->sun_path, name.data(), n);
  if (abstract) addr->sun_path[0] = '\0';
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n + (abstract ? 0 : 1));
  return true;
}

std::vector<uint8_t> BuildRights(const std::vector<int>& fds) {
  if (fds.empty()) return {};
  size_t bytes = sizeof(int) * fds.size();
  std::vector<uint8_t> buf(CMSG_SPACE(bytes), 0);
  msghdr mh{};
  mh.msg_control = buf.data();
  mh.msg_controllen = buf.size();
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(bytes);
  std::memcpy(CMSG_DATA(c), fds.data(), bytes);
  return buf;
}

Ancillary ParseRights(const msghdr& mh) {
  Ancillary out;
  msghdr copy = mh;  // the CMSG macros take a non-const header
  for (cmsghdr* c = CMSG_FIRSTHDR(&copy); c != nullptr; c = CMSG_NXTHDR(&copy, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      ++out.foreign;
      continue;
    }
    size_t payload = c->cmsg_len - CMSG_LEN(0);
    size_t count = payload / sizeof(int);
    const uint8_t* p = CMSG_DATA(c);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, p + i * sizeof(int), sizeof fd);  // CMSG_DATA may be unaligned for int
      out.fds.push_back(fd);
    }
  }
  return out;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) UniqueFd(fd).reset();
  fds->clear();
}

namespace {

// A path bound by a socket nobody listens on any more: connect is refused.
// Only then may the file be removed (never a regular file, never a live
// listener's socket).
bool IsStaleSocket(const std::string& path, int type) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_un addr;
  socklen_t len;
  ErrorInfo ignored;
  if (!MakeAddr(path, &addr, &len, &ignored)) return false;
  UniqueFd probe(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return false;
  if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) return false;
  // EPROTOTYPE: a listener of the other socket type holds the path; it is alive.
  return errno == ECONNREFUSED;
}

}  // namespace

UniqueFd Listen(const std::string& name, const ListenOptions& opts, ErrorInfo* err) {
  sockaddr_un addr;
  socklen_t len;
  if (!MakeAddr(name, &addr, &len, err)) return {};
  bool abstract = name[0] == '@';
  UniqueFd fd(socket(AF_UNIX, opts.type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = Fail("socket", "unix socket");
    return {};
  }
  int rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len);
  if (rc != 0 && errno == EADDRINUSE && !abstract && IsStaleSocket(name, opts.type)) {
    if (unlink(name.c_str()) != 0 && errno != ENOENT) {
      *err = Fail("unlink", "remove stale socket " + name);
      return {};
    }
    rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len);
  }
  if (rc != 0) {
    *err = Fail("bind", "bind " + name);
    return {};
  }
  // Nobody can connect before listen(), so setting the mode here is race-free.
  if (!abstract && opts.mode >= 0 && chmod(name.c_str(), static_cast<mode_t>(opts.mode)) != 0) {
    *err = Fail("chmod", "chmod " + name);
    unlink(name.c_str());
    return {};
  }
  if (listen(fd.get(), opts.backlog) != 0) {
    *err = Fail("listen", "listen on " + name);
    if (!abstract) unlink(name.c_str());
    return {};
  }
  return fd;
}

UniqueFd Connect(const std::string& name, int type, bool* inProgress, ErrorInfo* err) {
  *inProgress = false;
  sockaddr_un addr;
  socklen_t len;
  if (!MakeAddr(name, &addr, &len, err)) return {};
  UniqueFd fd(socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = Fail("socket", "unix socket");
    return {};
  }
  for (;;) {
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) return fd;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EINPROGRESS) {
      *inProgress = true;
      return fd;
    }
    *err = Fail("connect", "connect " + name);
    return {};
  }
}

int SocketError(int fd) {
  int e = 0;
  socklen_t l = sizeof e;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0) return -errno;
  return e;
}

ssize_t SendRecord(int fd, const uint8_t* data, size_t len, const std::vector<int>& fds, ErrorInfo* err) {
  std::vector<uint8_t> control = BuildRights(fds);
  iovec iov{const_cast<uint8_t*>(data), len};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (!control.empty()) {
    mh.msg_control = control.data();
    mh.msg_controllen = control.size();
  }
  for (;;) {
    ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    *err = Fail("sendmsg", "send on unix socket");
    return -2;
  }
}

int RecvRecord(int fd, bool stream, size_t maxBytes, size_t maxFds, Received* out, ErrorInfo* err) {
  out->data.resize(maxBytes);
  std::vector<uint8_t> control(RightsSpace(maxFds), 0);
  iovec iov{out->data.data(), maxBytes};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (!control.empty()) {
    mh.msg_control = control.data();
    mh.msg_controllen = control.size();
  }
  int flags = MSG_CMSG_CLOEXEC | MSG_DONTWAIT | (stream ? 0 : MSG_TRUNC);
  ssize_t n;
  for (;;) {
    n = recvmsg(fd, &mh, flags);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      out->data.clear();
      return 0;
    }
    *err = Fail("recvmsg", "receive on unix socket");
    out->data.clear();
    return -1;
  }
  // Even a failed (truncated) read can carry fds: collect them so the
  // caller owns and closes them.
  out->fds = ParseRights(mh).fds;
  out->truncated = (mh.msg_flags & MSG_TRUNC) != 0;
  out->ctruncated = (mh.msg_flags & MSG_CTRUNC) != 0;
  out->fullSize = static_cast<size_t>(n);
  out->data.resize(std::min(static_cast<size_t>(n), maxBytes));
  return 1;
}

bool PeerCredentials(int fd, PeerCred* out, ErrorInfo* err) {
  ucred cred{};
  socklen_t l = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) != 0) {
    *err = Fail("getsockopt", "SO_PEERCRED");
    return false;
  }
  out->pid = cred.pid;
  out->uid = static_cast<int>(cred.uid);
  out->gid = static_cast<int>(cred.gid);
  return true;
}

}  // namespace podwire::sock
