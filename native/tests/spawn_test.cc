// netns::Spawn process-group, pidfd and cancel behaviour, and DupNetnsFd,
// on the real kernel. No netns switching: these run in the test's own netns.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "netns/netns_ops.h"
#include "tests/check.h"

using namespace podwire;

namespace {

long long NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// Live (non-zombie) members of process group `pgid`. Killed orphans stay
// zombies until init gets to them, which can take a while in a container.
int LiveMembers(pid_t pgid) {
  int n = 0;
  DIR* d = opendir("/proc");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pg = 0;
    if (sscanf(stat.c_str() + rp + 2, "%c %d %d", &state, &ppid, &pg) == 3 && pg == pgid && state != 'Z') ++n;
  }
  closedir(d);
  return n;
}

bool GroupGone(pid_t pgid, int ms = 2000) {
  long long end = NowMs() + ms;
  while (LiveMembers(pgid) != 0) {
    if (NowMs() > end) return false;
    usleep(20000);
  }
  return true;
}

netns::SpawnOptions Sh(const char* script) {
  netns::SpawnOptions so;
  so.argv = {"/bin/sh", "-c", script};
  so.env = {"PATH=/usr/bin:/bin"};
  return so;
}

}  // namespace

TEST(DupNetnsFdTakesOnlyNetnsFds) {
  ErrorInfo err;
  CHECK(!netns::DupNetnsFd(-1, &err).valid());
  CHECK_EQ(err.err, EBADF);
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  CHECK(self >= 0);
  UniqueFd dup = netns::DupNetnsFd(self, &err);
  CHECK(dup.valid());
  CHECK(dup.get() != self && dup.get() >= 3);
  CHECK(fcntl(dup.get(), F_GETFD) & FD_CLOEXEC);
  close(self);
  CHECK(fcntl(dup.get(), F_GETFD) != -1);  // ours survives the caller's close
  err = {};
  CHECK(!netns::DupNetnsFd(self, &err).valid());  // closed now
  CHECK_EQ(err.err, EBADF);
  int status = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  err = {};
  CHECK(!netns::DupNetnsFd(status, &err).valid());
  CHECK_EQ(err.err, EBADF);
  close(status);
  int mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  err = {};
  CHECK(!netns::DupNetnsFd(mnt, &err).valid());  // nsfs, but not a netns
  CHECK_EQ(err.err, EBADF);
  close(mnt);
}

TEST(SpawnEndsWhenChildExitsThoughGrandchildHoldsStdout) {
  auto so = Sh("(sleep 5) & echo hi");
  netns::SpawnResult r;
  bool restored;
  pid_t child = -1;
  long long t0 = NowMs();
  ErrorInfo e = netns::Spawn(so, &r, &restored, [&](pid_t p) { child = p; });
  CHECK(!e.failed());
  CHECK(NowMs() - t0 < 2000);
  CHECK_EQ(r.code, 0);
  CHECK_EQ(r.out, std::string("hi\n"));
  CHECK(LiveMembers(child) > 0);  // the grandchild lives on in the child's group
  kill(-child, SIGKILL);
  CHECK(GroupGone(child));
}

TEST(SpawnTimeoutKillsTheGroup) {
  auto so = Sh("sleep 30 & exec sleep 30");
  so.timeoutMs = 200;
  netns::SpawnResult r;
  bool restored;
  pid_t child = -1;
  long long t0 = NowMs();
  ErrorInfo e = netns::Spawn(so, &r, &restored, [&](pid_t p) { child = p; });
  CHECK(!e.failed());
  CHECK(r.timedOut);
  CHECK_EQ(r.signal, SIGKILL);
  CHECK(NowMs() - t0 < 1500);
  CHECK(GroupGone(child));
}

TEST(SpawnStopsWhenCancelFdFires) {
  UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  auto so = Sh("sleep 30 & wait");
  so.cancelFd = cancel.get();
  netns::SpawnResult r;
  bool restored;
  pid_t child = -1, reaped = -1;
  std::thread t([&] {
    usleep(100000);
    uint64_t one = 1;
    CHECK(write(cancel.get(), &one, sizeof one) == sizeof one);
  });
  long long t0 = NowMs();
  ErrorInfo e = netns::Spawn(so, &r, &restored, [&](pid_t p) { child = p; }, [&](pid_t p) { reaped = p; });
  t.join();
  CHECK_EQ(e.err, ECANCELED);
  CHECK(NowMs() - t0 < 1500);
  CHECK_EQ(reaped, child);
  CHECK(GroupGone(child));
}

TEST_MAIN()
