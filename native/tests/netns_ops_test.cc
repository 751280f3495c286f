// Namespace primitives on the real kernel (ctest runs as root in CI): every
// namespace made here lives under a private temp dir and is removed.
#include "netns/netns_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "tests/check.h"

using namespace podwire;

namespace {

uint64_t ThreadNetnsIno() {
  struct stat st;
  return stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

std::string TempDir() {
  char tmpl[] = "/tmp/pwt-ctest-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? d : "";
}

// Owns a run dir given to CreateNetns: PrepareRunDir bind-mounts it onto
// itself (as `ip netns add` does for /run/netns), so on scope exit — also
// after a failed CHECK — it detaches that mount and everything under it
// (netns files left mounted by a test that stopped half-way), then removes
// the dir and what is in it.
class RunDirGuard {
 public:
  explicit RunDirGuard(std::string dir) : dir_(std::move(dir)) {}
  RunDirGuard(const RunDirGuard&) = delete;
  RunDirGuard& operator=(const RunDirGuard&) = delete;
  ~RunDirGuard() {
    if (dir_.empty()) return;
    // Each CreateNetns may stack one more self-bind (EINVAL once none is left).
    for (int i = 0; i < 16 && umount2(dir_.c_str(), MNT_DETACH) == 0; ++i) {
    }
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") unlink((dir_ + "/" + n).c_str());
      }
      closedir(d);
    }
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return dir_; }
  // Whether any mount point at or under `dir` is in this process's mount table.
  static bool Mounted(const std::string& dir) {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.find(" " + dir + " ") != std::string::npos || line.find(" " + dir + "/") != std::string::npos) return true;
    return false;
  }

 private:
  std::string dir_;
};

}  // namespace

TEST(UniqueFdClosesOnce) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  {
    UniqueFd a(fds[0]);
    UniqueFd b(std::move(a));
    CHECK(!a.valid());
    CHECK_EQ(b.get(), fds[0]);
  }
  CHECK(fcntl(fds[0], F_GETFD) == -1 && errno == EBADF);
  UniqueFd w(fds[1]);
  int raw = w.release();
  CHECK(fcntl(raw, F_GETFD) != -1);
  close(raw);
}

TEST(OpenNetnsAcceptsOnlyNetworkNamespaces) {
  netns::NsId id;
  ErrorInfo err;
  UniqueFd self = netns::OpenNetns("/proc/self/ns/net", &id, &err);
  CHECK(self.valid());
  struct stat st;
  stat("/proc/self/ns/net", &st);
  CHECK_EQ(id.ino, static_cast<uint64_t>(st.st_ino));
  UniqueFd mnt = netns::OpenNetns("/proc/self/ns/mnt", &id, &err);
  CHECK(!mnt.valid());
  CHECK_EQ(err.code, std::string("ERR_NOT_NETNS"));
  UniqueFd file = netns::OpenNetns("/proc/self/status", &id, &err);
  CHECK(!file.valid());
  UniqueFd missing = netns::OpenNetns("/nonexistent", &id, &err);
  CHECK(!missing.valid());
  CHECK_EQ(err.err, ENOENT);
}

TEST(CreateRunInRemoveRestoresTheThread) {
  if (geteuid() != 0) {
    std::printf("  (needs root: %s)\n", std::getenv("CI") ? "failing in CI" : "skipped");
    if (std::getenv("CI")) CHECK(false);
    return;
  }
  std::string dir = TempDir();
  CHECK(!dir.empty());
  if (dir.empty()) return;
  {  // the guard unmounts and removes the run dir when this scope ends, even after a failed CHECK
    RunDirGuard guard(dir);
    std::thread t([&] {
      uint64_t before = ThreadNetnsIno();
      bool restored = false;
      ErrorInfo e = netns::CreateNetns(dir, "n1", &restored);
      CHECK(!e.failed());
      CHECK(restored);
      CHECK_EQ(ThreadNetnsIno(), before);
      netns::NsId id;
      UniqueFd fd = netns::OpenNetns(dir + "/n1", &id, &e);
      CHECK(fd.valid());
      CHECK(id.ino != before);
      uint64_t inside = 0;
      e = netns::RunInNetns(fd.get(), [&] {
        inside = ThreadNetnsIno();
        return ErrorInfo{};
      }, &restored);
      CHECK(!e.failed() && restored);
      CHECK_EQ(inside, id.ino);
      CHECK_EQ(ThreadNetnsIno(), before);
      // sysctl reads resolve against the switched thread's netns.
      std::string fwd;
      e = netns::RunInNetns(fd.get(), [&] { return netns::WriteFile("/proc/sys/net/ipv4/ip_default_ttl", "33"); }, &restored);
      CHECK(!e.failed());
      e = netns::RunInNetns(fd.get(), [&] { return netns::ReadFile("/proc/sys/net/ipv4/ip_default_ttl", &fwd); }, &restored);
      CHECK_EQ(fwd, std::string("33\n"));
      // Spawned children are born inside.
      netns::SpawnOptions so;
      so.argv = {"/usr/bin/readlink", "/proc/self/ns/net"};
      so.nsFd = fd.get();
      netns::SpawnResult r;
      e = netns::Spawn(so, &r, &restored);
      CHECK(!e.failed() && restored);
      CHECK_EQ(r.code, 0);
      CHECK_EQ(r.out, "net:[" + std::to_string(id.ino) + "]\n");
      CHECK_EQ(ThreadNetnsIno(), before);
      fd.reset();
      CHECK(!netns::RemoveNetns(dir + "/n1").failed());
    });
    t.join();
    CHECK(RunDirGuard::Mounted(dir));  // the self-bind PrepareRunDir made
  }
  // The guard left no mount (nor the dir) behind.
  CHECK(!RunDirGuard::Mounted(dir));
  CHECK(access(dir.c_str(), F_OK) != 0);
}

TEST(RunInNetnsWithNegativeFdRunsInPlace) {
  uint64_t before = ThreadNetnsIno(), inside = 0;
  bool restored = false;
  ErrorInfo e = netns::RunInNetns(-1, [&] {
    inside = ThreadNetnsIno();
    return ErrorInfo::Errno(EIO, "probe", "from fn");
  }, &restored);
  CHECK(restored);
  CHECK_EQ(e.err, EIO);  // fn's own result, not a setns failure
  CHECK_EQ(inside, before);
}

TEST(AnonymousNetnsHasItsOwnInodeAndRestoresTheThread) {
  if (geteuid() != 0) {
    if (std::getenv("CI")) CHECK(false);
    return;
  }
  std::thread t([] {
    uint64_t before = ThreadNetnsIno();
    netns::NsId id;
    ErrorInfo err;
    bool restored = false;
    UniqueFd fd = netns::CreateAnonymousNetns(&id, &err, &restored);
    CHECK(fd.valid());
    CHECK(restored);
    CHECK(id.ino != before);
    CHECK_EQ(ThreadNetnsIno(), before);
  });
  t.join();
}

TEST(SpawnFeedsStdinAndEnforcesTimeout) {
  bool restored;
  netns::SpawnOptions so;
  so.argv = {"/bin/cat"};
  so.stdinData = std::string(200000, 'x');  // more than a pipe buffer
  so.hasStdin = true;
  netns::SpawnResult r;
  ErrorInfo e = netns::Spawn(so, &r, &restored);
  CHECK(!e.failed());
  CHECK_EQ(r.out.size(), 200000u);
  netns::SpawnOptions slow;
  slow.argv = {"/bin/sleep", "20"};
  slow.timeoutMs = 100;
  netns::SpawnResult r2;
  e = netns::Spawn(slow, &r2, &restored);
  CHECK(!e.failed());
  CHECK(r2.timedOut);
  CHECK_EQ(r2.signal, 9);
  netns::SpawnOptions bad;
  bad.argv = {"/nonexistent/prog"};
  netns::SpawnResult r3;
  e = netns::Spawn(bad, &r3, &restored);
  CHECK(e.failed());
  CHECK_EQ(e.err, ENOENT);
}

TEST_MAIN()
