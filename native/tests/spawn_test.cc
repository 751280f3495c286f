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

// One Spawn call, timed, with the pids its callbacks reported.
struct Ran {
  ErrorInfo e;
  netns::SpawnResult r;
  pid_t child = -1, reaped = -1;
  long long ms = 0;
};
Ran RunSpawn(const netns::SpawnOptions& so) {
  Ran x;
  bool restored;
  long long t0 = NowMs();
  x.e = netns::Spawn(so, &x.r, &restored, [&](pid_t p) { x.child = p; }, [&](pid_t p) { x.reaped = p; });
  x.ms = NowMs() - t0;
  return x;
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
  Ran x = RunSpawn(Sh("(sleep 5) & echo hi"));
  CHECK(!x.e.failed());
  CHECK(x.ms < 2000);
  CHECK_EQ(x.r.code, 0);
  CHECK_EQ(x.r.out, std::string("hi\n"));
  CHECK(LiveMembers(x.child) > 0);  // the grandchild lives on in the child's group
  kill(-x.child, SIGKILL);
  CHECK(GroupGone(x.child));
}

TEST(SpawnTimeoutKillsTheGroup) {
  auto so = Sh("sleep 30 & exec sleep 30");
  so.timeoutMs = 200;
  Ran x = RunSpawn(so);
  CHECK(!x.e.failed());
  CHECK(x.r.timedOut);
  CHECK_EQ(x.r.signal, SIGKILL);
  CHECK(x.ms < 1500);
  CHECK(GroupGone(x.child));
}

TEST(SpawnStopsWhenCancelFdFires) {
  UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  auto so = Sh("sleep 30 & wait");
  so.cancelFd = cancel.get();
  std::thread t([&] {
    usleep(100000);
    uint64_t one = 1;
    CHECK(write(cancel.get(), &one, sizeof one) == sizeof one);
  });
  Ran x = RunSpawn(so);
  t.join();
  CHECK_EQ(x.e.err, ECANCELED);
  CHECK(x.ms < 1500);
  CHECK_EQ(x.reaped, x.child);
  CHECK(GroupGone(x.child));
}

TEST_MAIN()
