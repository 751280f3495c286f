// Unix-domain socket primitives with no N-API in sight (shared by the addon
// and the ctest binaries): addresses (path or '@abstract'), listen with safe
// replacement of a stale socket file, non-blocking connect, and one record
// sent or received together with SCM_RIGHTS file descriptors.
#pragma once
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/error_info.h"
#include "../common/fd.h"

namespace podwire::sock {

// '@name' is the Linux abstract namespace (leading NUL), anything else a
// filesystem path. False (and `err` EINVAL/ENAMETOOLONG) for an empty name or
// one that does not fit sun_path.
bool MakeAddr(const std::string& name, sockaddr_un* addr, socklen_t* len, ErrorInfo* err);

// Control buffer carrying one SCM_RIGHTS message with `fds` (empty for no
// fds). Sized with CMSG_SPACE, zero-filled.
std::vector<uint8_t> BuildRights(const std::vector<int>& fds);

// What came with one received record.
struct Ancillary {
  std::vector<int> fds;   // SCM_RIGHTS fds, in order (now owned by the caller)
  int foreign = 0;        // control messages of any other kind (ignored)
};
// Walks the control messages of a received msghdr and collects the fds.
Ancillary ParseRights(const msghdr& mh);

// Space for `maxFds` fds in one SCM_RIGHTS message.
inline size_t RightsSpace(size_t maxFds) { return maxFds ? CMSG_SPACE(sizeof(int) * maxFds) : 0; }

struct ListenOptions {
  int type = SOCK_SEQPACKET;  // or SOCK_STREAM
  int mode = -1;               // chmod of the socket file; -1 keeps the umask's
  int backlog = 128;
};
// socket + bind + chmod + listen, non-blocking and close-on-exec. When the
// path is taken by a *socket* nobody listens on (connect gives
// ECONNREFUSED), it is unlinked and the bind retried once; anything else
// (a regular file, a live listener) fails with EADDRINUSE untouched.
UniqueFd Listen(const std::string& name, const ListenOptions& opts, ErrorInfo* err);

// Non-blocking connect. `inProgress` is set when the kernel answered EAGAIN
// (backlog full) or EINPROGRESS: wait for writability, then SocketError().
UniqueFd Connect(const std::string& name, int type, bool* inProgress, ErrorInfo* err);

// SO_ERROR of a socket (0 when none), or -errno when it cannot be read.
int SocketError(int fd);

// One sendmsg with MSG_NOSIGNAL (a dead peer gives EPIPE, never SIGPIPE).
// Returns bytes sent, -1 for "would block", or -2 with `err` set.
ssize_t SendRecord(int fd, const uint8_t* data, size_t len, const std::vector<int>& fds, ErrorInfo* err);

struct Received {
  std::vector<uint8_t> data;
  std::vector<int> fds;   // owned by the caller (closed on every error path here)
  bool truncated = false;  // MSG_TRUNC: the record was larger than the buffer
  bool ctruncated = false; // MSG_CTRUNC: more fds than space (the kernel closed the excess)
  size_t fullSize = 0;     // the record's real size when truncated (MSG_TRUNC reports it)
};
// One recvmsg with MSG_CMSG_CLOEXEC into `maxBytes` of data and room for
// `maxFds` fds. Returns 1 with `out` filled (data empty: EOF), 0 for "would
// block", -1 with `err` set. For record sockets (`stream` false) the real
// size of a truncated record is asked for too (MSG_TRUNC as input flag).
int RecvRecord(int fd, bool stream, size_t maxBytes, size_t maxFds, Received* out, ErrorInfo* err);

struct PeerCred {
  int pid = 0;
  int uid = -1;
  int gid = -1;
};
bool PeerCredentials(int fd, PeerCred* out, ErrorInfo* err);

// Closes every fd in the list (each exactly once) and clears it.
void CloseAll(std::vector<int>* fds);

}  // namespace podwire::sock
