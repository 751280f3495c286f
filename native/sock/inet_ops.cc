#include "inet_ops.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

// From linux/netfilter_ipv4.h and netfilter_ipv6/ip6_tables.h (kernel UAPI).
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT 75
#endif

namespace podwire::sock {
namespace {

ErrorInfo Fail(const char* op, const std::string& what) {
  int e = errno;
  return ErrorInfo::Errno(e, op, what + ": " + std::strerror(e));
}

std::string Where(const InetSpec& s) {
  bool v6 = s.address.find(':') != std::string::npos;
  return std::string(s.udp ? "udp " : "tcp ") + (v6 ? "[" + s.address + "]" : s.address) + ":" + std::to_string(s.port);
}

bool ToSockAddr(const sockaddr_storage& ss, SockAddr* out) {
  char buf[INET6_ADDRSTRLEN];
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    out->family = 4;
    out->address = buf;
    out->port = ntohs(a->sin_port);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], buf, sizeof buf);
      out->family = 4;
    } else {
      inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
      out->family = 6;
    }
    out->address = buf;
    out->port = ntohs(a->sin6_port);
    return true;
  }
  return false;
}

// Opens one socket; returns false with `err` set, or true with `out->fd`
// invalid when an optional spec could not be bound.
bool OpenOne(const InetSpec& s, InetOpened* out, ErrorInfo* err) {
  sockaddr_storage ss{};
  socklen_t len;
  bool v6 = s.address.find(':') != std::string::npos;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(s.port));
    if (inet_pton(AF_INET6, s.address.c_str(), &a->sin6_addr) != 1) {
      *err = ErrorInfo::Errno(EINVAL, "socket-address", "not an IPv6 address: " + s.address);
      return false;
    }
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(s.port));
    if (inet_pton(AF_INET, s.address.c_str(), &a->sin_addr) != 1) {
      *err = ErrorInfo::Errno(EINVAL, "socket-address", "not an IPv4 address: " + s.address);
      return false;
    }
    len = sizeof *a;
  }
  int family = v6 ? AF_INET6 : AF_INET;
  UniqueFd fd(socket(family, (s.udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    if (s.optional && errno == EAFNOSUPPORT) return true;
    *err = Fail("socket", Where(s));
    return false;
  }
  int one = 1;
  if (s.mark != 0 && setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &s.mark, sizeof s.mark) != 0) {
    *err = Fail("setsockopt", "SO_MARK on " + Where(s));
    return false;
  }
  if (s.reusePort && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    *err = Fail("setsockopt", "SO_REUSEPORT on " + Where(s));
    return false;
  }
  if (!s.bind) {  // connect() or the first send binds it
    out->fd = std::move(fd);
    return true;
  }
  if (!s.udp) setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (s.transparent) {
    // Best effort, as ztunnel does when original-source is not required.
    out->transparent = v6 ? setsockopt(fd.get(), SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof one) == 0
                          : setsockopt(fd.get(), SOL_IP, IP_TRANSPARENT, &one, sizeof one) == 0;
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (s.optional && (errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT)) return true;
    *err = Fail("bind", "bind " + Where(s));
    return false;
  }
  if (!s.udp && listen(fd.get(), s.backlog) != 0) {
    *err = Fail("listen", "listen on " + Where(s));
    return false;
  }
  out->fd = std::move(fd);
  return true;
}

}  // namespace

bool OpenInetSockets(const std::vector<InetSpec>& specs, std::vector<InetOpened>* out, ErrorInfo* err) {
  out->clear();
  out->resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!OpenOne(specs[i], &(*out)[i], err)) {
      err->index = static_cast<int>(i);
      out->clear();  // closes everything opened so far
      return false;
    }
  }
  return true;
}

bool LocalAddr(int fd, SockAddr* out, ErrorInfo* err) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    *err = Fail("getsockname", "local address");
    return false;
  }
  if (!ToSockAddr(ss, out)) {
    *err = ErrorInfo::Errno(EAFNOSUPPORT, "getsockname", "not an inet socket");
    return false;
  }
  return true;
}

bool PeerAddr(int fd, SockAddr* out, ErrorInfo* err) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    *err = Fail("getpeername", "peer address");
    return false;
  }
  if (!ToSockAddr(ss, out)) {
    *err = ErrorInfo::Errno(EAFNOSUPPORT, "getpeername", "not an inet socket");
    return false;
  }
  return true;
}

bool OriginalDst(int fd, SockAddr* out, bool* redirected, ErrorInfo* err) {
  *redirected = false;
  SockAddr local;
  if (!LocalAddr(fd, &local, err)) return false;
  // Conntrack answers by the connection's family: a v4 (or v4-mapped)
  // connection asks SOL_IP, a v6 one SOL_IPV6. ENOENT: nothing was NATed.
  sockaddr_storage ss{};
  socklen_t len;
  int rc;
  if (local.family == 4) {
    len = sizeof(sockaddr_in);
    rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len);
  } else {
    len = sizeof(sockaddr_in6);
    rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len);
  }
  SockAddr orig;
  if (rc == 0 && ToSockAddr(ss, &orig) && (orig.address != local.address || orig.port != local.port)) {
    *out = orig;
    *redirected = true;
    return true;
  }
  *out = local;  // TPROXY keeps the original destination as the local address
  return true;
}

}  // namespace podwire::sock
