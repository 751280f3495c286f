// The inet sockets a ztunnel-like peer opens inside a pod's netns (TCP
// listeners and UDP sockets with SO_MARK, SO_REUSEPORT and IP_TRANSPARENT),
// and the original destination of a captured TCP connection. No N-API.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/error_info.h"
#include "../common/fd.h"

namespace podwire::sock {

struct InetSpec {
  bool udp = false;
  std::string address;       // numeric, '0.0.0.0', '::', '127.0.0.1', '::1'
  int port = 0;
  uint32_t mark = 0;         // SO_MARK; 0: not set
  bool reusePort = false;
  bool transparent = false;  // best effort (IP_TRANSPARENT / IPV6_TRANSPARENT)
  bool optional = false;     // a bind failing with EADDRNOTAVAIL/EAFNOSUPPORT yields no socket, not an error
  int backlog = 128;
  bool bind = true;          // false: a plain socket with its options set, for connect() or send()
};

struct InetOpened {
  UniqueFd fd;               // invalid when optional and skipped
  bool transparent = false;  // whether IP_TRANSPARENT took
};

// Opens every spec in the calling thread's netns (run it inside the pod via
// RunInNetns). All or nothing: on an error every socket opened so far is
// closed and `err` names the failing spec's address and port.
bool OpenInetSockets(const std::vector<InetSpec>& specs, std::vector<InetOpened>* out, ErrorInfo* err);

struct SockAddr {
  int family = 0;  // 4 or 6
  std::string address;
  int port = 0;
};

// Where a captured connection was headed. `redirected` is true when
// conntrack had a NAT original (REDIRECT: SO_ORIGINAL_DST or
// IP6T_SO_ORIGINAL_DST); otherwise the local address is the destination
// (TPROXY or a direct connection). False only when getsockname fails.
bool OriginalDst(int fd, SockAddr* out, bool* redirected, ErrorInfo* err);

// getsockname / getpeername as numeric address + port (v4-mapped v6 is
// reported as v4).
bool LocalAddr(int fd, SockAddr* out, ErrorInfo* err);
bool PeerAddr(int fd, SockAddr* out, ErrorInfo* err);

}  // namespace podwire::sock
