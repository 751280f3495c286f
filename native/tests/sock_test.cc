// Unit tests of the unix-socket core: control-message building and parsing,
// addresses, record send/receive with fds, truncation, and the stale-socket
// rule of Listen. Needs no privileges.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "check.h"
#include "sock/unix_ops.h"

using namespace podwire;
using namespace podwire::sock;

namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) >= 0; }

std::string TempDir() {
  char tmpl[] = "/tmp/pwt-sock-XXXXXX";
  return mkdtemp(tmpl);
}

struct Pair {
  UniqueFd a, b;
  explicit Pair(int type = SOCK_SEQPACKET) {
    int sv[2];
    if (socketpair(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0) {
      a.reset(sv[0]);
      b.reset(sv[1]);
    }
  }
};

}  // namespace

TEST(build_rights_layout) {
  CHECK(BuildRights({}).empty());
  std::vector<uint8_t> one = BuildRights({7});
  CHECK_EQ(one.size(), static_cast<size_t>(CMSG_SPACE(sizeof(int))));
  cmsghdr h;
  std::memcpy(&h, one.data(), sizeof h);
  CHECK_EQ(h.cmsg_level, SOL_SOCKET);
  CHECK_EQ(h.cmsg_type, SCM_RIGHTS);
  CHECK_EQ(h.cmsg_len, static_cast<size_t>(CMSG_LEN(sizeof(int))));
  int fd;
  std::memcpy(&fd, one.data() + CMSG_LEN(0), sizeof fd);
  CHECK_EQ(fd, 7);
  std::vector<uint8_t> three = BuildRights({3, 4, 5});
  CHECK_EQ(three.size(), static_cast<size_t>(CMSG_SPACE(3 * sizeof(int))));
}

TEST(parse_rights_roundtrip_and_foreign) {
  // Two control messages: a foreign one (SCM_CREDENTIALS-shaped) then rights.
  std::vector<uint8_t> rights = BuildRights({11, 12});
  std::vector<uint8_t> buf(CMSG_SPACE(sizeof(ucred)) + rights.size(), 0);
  cmsghdr foreign{};
  foreign.cmsg_len = CMSG_LEN(sizeof(ucred));
  foreign.cmsg_level = SOL_SOCKET;
  foreign.cmsg_type = SCM_CREDENTIALS;
  std::memcpy(buf.data(), &foreign, sizeof foreign);
  std::memcpy(buf.data() + CMSG_SPACE(sizeof(ucred)), rights.data(), rights.size());
  msghdr mh{};
  mh.msg_control = buf.data();
  mh.msg_controllen = buf.size();
  Ancillary a = ParseRights(mh);
  CHECK_EQ(a.foreign, 1);
  CHECK_EQ(a.fds.size(), static_cast<size_t>(2));
  if (a.fds.size() == 2) {
    CHECK_EQ(a.fds[0], 11);
    CHECK_EQ(a.fds[1], 12);
  }
  msghdr empty{};
  CHECK(ParseRights(empty).fds.empty());
}

TEST(rights_space_matches_ztunnel) {
  // ztunnel reserves cmsg_space!(RawFd): room for one int, which the
  // alignment stretches to two on 64-bit; a third gives MSG_CTRUNC.
  CHECK_EQ(RightsSpace(0), static_cast<size_t>(0));
  CHECK_EQ(RightsSpace(1), static_cast<size_t>(CMSG_SPACE(sizeof(int))));
}

TEST(make_addr_path_and_abstract) {
  sockaddr_un a;
  socklen_t len;
  ErrorInfo err;
  CHECK(MakeAddr("/tmp/x.sock", &a, &len, &err));
  CHECK_EQ(std::string(a.sun_path), std::string("/tmp/x.sock"));
  CHECK_EQ(len, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 12));
  CHECK(MakeAddr("@zds", &a, &len, &err));
  CHECK_EQ(a.sun_path[0], '\0');
  CHECK_EQ(std::string(a.sun_path + 1, 3), std::string("zds"));
  CHECK_EQ(len, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 4));
  CHECK(!MakeAddr("", &a, &len, &err));
  CHECK_EQ(err.err, EINVAL);
  CHECK(!MakeAddr("@", &a, &len, &err));
  CHECK(!MakeAddr("/" + std::string(200, 'x'), &a, &len, &err));
  CHECK_EQ(err.err, ENAMETOOLONG);
  CHECK(MakeAddr("@" + std::string(107, 'y'), &a, &len, &err));  // abstract uses all 108 bytes
  CHECK(!MakeAddr("/" + std::string(107, 'y'), &a, &len, &err)); // a path needs its NUL
}

TEST(record_with_fd_roundtrip) {
  Pair p;
  CHECK(p.a.valid());
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const uint8_t msg[] = {0x1a, 0x00};
  ErrorInfo err;
  CHECK_EQ(SendRecord(p.a.get(), msg, sizeof msg, {devnull.get()}, &err), static_cast<ssize_t>(2));
  Received r;
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 1);
  CHECK_EQ(r.data.size(), static_cast<size_t>(2));
  CHECK_EQ(r.fds.size(), static_cast<size_t>(1));
  CHECK(!r.truncated && !r.ctruncated);
  if (!r.fds.empty()) {
    CHECK(r.fds[0] != devnull.get());
    CHECK(fcntl(r.fds[0], F_GETFD) & FD_CLOEXEC);  // MSG_CMSG_CLOEXEC
    struct stat s1, s2;
    fstat(r.fds[0], &s1);
    fstat(devnull.get(), &s2);
    CHECK(s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev);
  }
  int received = r.fds.empty() ? -1 : r.fds[0];
  CloseAll(&r.fds);
  CHECK(r.fds.empty());
  CHECK(received < 0 || !IsOpen(received));
  // Nothing more: would block.
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 0);
}

TEST(truncated_record_reports_full_size) {
  Pair p;
  std::vector<uint8_t> big(2000, 0x55);
  ErrorInfo err;
  CHECK_EQ(SendRecord(p.a.get(), big.data(), big.size(), {}, &err), static_cast<ssize_t>(2000));
  Received r;
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 1);
  CHECK(r.truncated);
  CHECK_EQ(r.fullSize, static_cast<size_t>(2000));
  CHECK_EQ(r.data.size(), static_cast<size_t>(1024));
  // The record was consumed as a whole.
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 0);
}

TEST(too_many_fds_is_ctrunc_and_received_ones_are_reported) {
  Pair p;
  UniqueFd n1(open("/dev/null", O_RDONLY | O_CLOEXEC)), n2(open("/dev/null", O_RDONLY | O_CLOEXEC)),
      n3(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const uint8_t msg[] = {0x0a, 0x00};
  ErrorInfo err;
  CHECK_EQ(SendRecord(p.a.get(), msg, 2, {n1.get(), n2.get(), n3.get()}, &err), static_cast<ssize_t>(2));
  Received r;
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 1);
  CHECK(r.ctruncated);
  CHECK(r.fds.size() <= 2);  // what fit; the kernel closed the rest
  CloseAll(&r.fds);
}

TEST(zero_length_record_reads_as_empty) {
  Pair p;
  ErrorInfo err;
  CHECK_EQ(SendRecord(p.a.get(), nullptr, 0, {}, &err), static_cast<ssize_t>(0));
  Received r;
  CHECK_EQ(RecvRecord(p.b.get(), false, 1024, 1, &r, &err), 1);
  CHECK(r.data.empty());  // indistinguishable from EOF: never send one
}

TEST(send_to_closed_peer_is_epipe) {
  Pair p;
  p.b.reset();
  const uint8_t msg[] = {0x08, 0x01};
  ErrorInfo err;
  CHECK_EQ(SendRecord(p.a.get(), msg, 2, {}, &err), static_cast<ssize_t>(-2));
  CHECK_EQ(err.err, EPIPE);
  CHECK_EQ(err.op, std::string("sendmsg"));
}

TEST(full_buffer_would_block) {
  Pair p;
  std::vector<uint8_t> chunk(1000, 1);
  ErrorInfo err;
  ssize_t n = 0;
  int sent = 0;
  while ((n = SendRecord(p.a.get(), chunk.data(), chunk.size(), {}, &err)) > 0 && sent < 100000) ++sent;
  CHECK_EQ(n, static_cast<ssize_t>(-1));
  CHECK(sent > 0);
}

TEST(listen_replaces_only_stale_sockets) {
  std::string dir = TempDir();
  std::string path = dir + "/z.sock";
  ListenOptions opts;
  opts.mode = 0600;
  ErrorInfo err;
  {
    UniqueFd l = Listen(path, opts, &err);
    CHECK(l.valid());
    struct stat st;
    CHECK(stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0600u);
    // A live listener is never replaced.
    ErrorInfo e2;
    UniqueFd again = Listen(path, opts, &e2);
    CHECK(!again.valid());
    CHECK_EQ(e2.err, EADDRINUSE);
    // Connect works while it listens.
    bool inProgress;
    UniqueFd c = Connect(path, SOCK_SEQPACKET, &inProgress, &err);
    CHECK(c.valid());
  }
  // The listener is gone; its file is stale and gets replaced.
  UniqueFd l2 = Listen(path, opts, &err);
  CHECK(l2.valid());
  l2.reset();
  unlink(path.c_str());
  // A regular file at the path is left alone.
  { UniqueFd f(open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
  ErrorInfo e3;
  UniqueFd l3 = Listen(path, opts, &e3);
  CHECK(!l3.valid());
  CHECK_EQ(e3.err, EADDRINUSE);
  struct stat st;
  CHECK(stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode));
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(connect_refused_and_missing) {
  bool inProgress;
  ErrorInfo err;
  UniqueFd c = Connect("/nonexistent-dir-pw/z.sock", SOCK_SEQPACKET, &inProgress, &err);
  CHECK(!c.valid());
  CHECK_EQ(err.err, ENOENT);
  UniqueFd d = Connect("@pwt-sock-test-nobody-" + std::to_string(getpid()), SOCK_SEQPACKET, &inProgress, &err);
  CHECK(!d.valid());
  CHECK_EQ(err.err, ECONNREFUSED);
}

TEST(peer_credentials_of_pair) {
  Pair p;
  PeerCred c;
  ErrorInfo err;
  CHECK(PeerCredentials(p.a.get(), &c, &err));
  CHECK_EQ(c.pid, static_cast<int>(getpid()));
  CHECK_EQ(c.uid, static_cast<int>(getuid()));
}

TEST_MAIN()
