#include "netns_ops.h"

#include "../common/thread_state.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

namespace podwire::netns {
namespace {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

ErrorInfo Fail(const char* op, const std::string& what) {
  int e = errno;
  return ErrorInfo::Errno(e, op, what + ": " + std::strerror(e));
}

}  // namespace

bool StatNetns(int fd, NsId* id, ErrorInfo* err) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = Fail("fstat", "stat of netns fd");
    return false;
  }
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  return true;
}

namespace {
bool IsNetnsFd(int fd) {
  struct statfs sfs;
  return fstatfs(fd, &sfs) == 0 && static_cast<unsigned long>(sfs.f_type) == NSFS_MAGIC &&
         ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET;
}
}  // namespace

UniqueFd DupNetnsFd(int fd, ErrorInfo* err) {
  if (fd < 0) {
    *err = ErrorInfo::Errno(EBADF, "netns-fd", "netns fd " + std::to_string(fd) + " is not a file descriptor");
    return {};
  }
  UniqueFd dup(fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!dup.valid()) {
    *err = Fail("netns-fd", "dup netns fd " + std::to_string(fd));
    return {};
  }
  if (!IsNetnsFd(dup.get())) {
    *err = ErrorInfo::Errno(EBADF, "netns-fd", "fd " + std::to_string(fd) + " is not a network namespace");
    return {};
  }
  return dup;
}

UniqueFd OpenNetns(const std::string& path, NsId* id, ErrorInfo* err) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    *err = Fail("open", "open " + path);
    return {};
  }
  struct statfs sfs;
  if (fstatfs(fd.get(), &sfs) != 0) {
    *err = Fail("fstatfs", "statfs " + path);
    return {};
  }
  // A /run/netns/<name> file whose mount is gone is a plain empty file; a
  // /proc/<pid>/ns/mnt is nsfs but not a *network* namespace. Reject both.
  if (static_cast<unsigned long>(sfs.f_type) != NSFS_MAGIC ||
      ioctl(fd.get(), NS_GET_NSTYPE) != CLONE_NEWNET) {
    ErrorInfo e = ErrorInfo::Errno(EINVAL, "open-netns",
                                   path + " is not a network namespace (expected an nsfs netns file)");
    e.code = "ERR_NOT_NETNS";
    *err = e;
    return {};
  }
  if (!StatNetns(fd.get(), id, err)) return {};
  return fd;
}

ErrorInfo RunInNetns(int targetFd, const std::function<ErrorInfo()>& fn, bool* restored) {
  *restored = true;
  if (targetFd < 0) return fn();
  UniqueFd orig(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!orig.valid()) return Fail("open", "open /proc/thread-self/ns/net");
  if (setns(targetFd, CLONE_NEWNET) != 0) return Fail("setns", "setns into target netns");
  ErrorInfo result = fn();
  if (setns(orig.get(), CLONE_NEWNET) != 0) {
    *restored = false;  // the thread must end: JobRunner retires poisoned threads
    ThreadPoisoned() = true;
    if (!result.failed()) result = Fail("setns", "restore original netns");
  }
  return result;
}

namespace {

// ip netns add makes the run dir a shared mount so that bind mounts made in
// it propagate to other mount namespaces. Same algorithm.
ErrorInfo PrepareRunDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Fail("mkdir", "mkdir " + dir);
  bool bound = false;
  while (mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) != 0) {
    if (errno != EINVAL || bound) return Fail("mount", "make " + dir + " shared");
    if (mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) != 0)
      return Fail("mount", "bind " + dir + " onto itself");
    bound = true;
  }
  return {};
}

}  // namespace

ErrorInfo CreateNetns(const std::string& dir, const std::string& name, bool* restored) {
  *restored = true;
  if (ErrorInfo e = PrepareRunDir(dir); e.failed()) return e;
  std::string path = dir + "/" + name;
  {
    UniqueFd f(open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!f.valid()) return Fail("create-netns", "create " + path);
  }
  UniqueFd orig(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!orig.valid()) {
    ErrorInfo e = Fail("open", "open /proc/thread-self/ns/net");
    unlink(path.c_str());
    return e;
  }
  ErrorInfo result;
  if (unshare(CLONE_NEWNET) != 0) {
    result = Fail("unshare", "unshare(CLONE_NEWNET)");
  } else if (mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
    result = Fail("mount", "bind-mount new netns at " + path);
  }
  if (setns(orig.get(), CLONE_NEWNET) != 0) {
    *restored = false;
    ThreadPoisoned() = true;
    if (!result.failed()) result = Fail("setns", "restore original netns");
  }
  if (result.failed()) {
    umount2(path.c_str(), MNT_DETACH);
    unlink(path.c_str());
  }
  return result;
}

UniqueFd CreateAnonymousNetns(NsId* id, ErrorInfo* err, bool* restored) {
  *restored = true;
  UniqueFd orig(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!orig.valid()) {
    *err = Fail("open", "open /proc/thread-self/ns/net");
    return {};
  }
  if (unshare(CLONE_NEWNET) != 0) {
    *err = Fail("unshare", "unshare(CLONE_NEWNET)");
    return {};
  }
  UniqueFd fd(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) *err = Fail("open", "open the new netns");
  if (setns(orig.get(), CLONE_NEWNET) != 0) {
    *restored = false;
    ThreadPoisoned() = true;
    *err = Fail("setns", "restore original netns");
    return {};
  }
  if (fd.valid() && !StatNetns(fd.get(), id, err)) return {};
  return fd;
}

ErrorInfo RemoveNetns(const std::string& path) {
  if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
    return Fail("umount", "unmount " + path);
  if (unlink(path.c_str()) != 0) return Fail("unlink", "remove " + path);
  return {};
}

ErrorInfo ReadFile(const std::string& path, std::string* out) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Fail("open", "open " + path);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail("read", "read " + path);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return {};
}

ErrorInfo WriteFile(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Fail("open", "open " + path);
  ssize_t n = write(fd.get(), value.data(), value.size());
  if (n < 0) return Fail("write", "write " + path);
  if (static_cast<size_t>(n) != value.size()) return ErrorInfo::Errno(EIO, "write", "short write to " + path);
  return {};
}

namespace {

struct Pipes {
  UniqueFd inR, inW, outR, outW, errR, errW;
};

bool MakePipe(UniqueFd* r, UniqueFd* w) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  r->reset(p[0]);
  w->reset(p[1]);
  return true;
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// posix_spawn (clone(CLONE_VM|CLONE_VFORK) in glibc) from the calling
// thread: the child inherits this thread's netns.
ErrorInfo DoSpawn(const SpawnOptions& opts, Pipes* p, pid_t* pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, p->inR.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, p->outW.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, p->errW.get(), 2);
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opts.cwd.c_str());
  // Node ignores SIGPIPE and may block signals on this thread; the child
  // must start with default dispositions and an empty mask.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  // Its own process group (pgid = its pid), so a timeout or teardown can
  // kill the grandchildren too: kill(-pid).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  auto argv = CStrings(opts.argv);
  auto envp = CStrings(opts.env);
  int rc = posix_spawn(pid, opts.argv[0].c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return ErrorInfo::Errno(rc, "spawn", "spawn " + opts.argv[0] + ": " + std::strerror(rc));
  return {};
}

}  // namespace

namespace {

// Reads what is in a non-blocking pipe right now (FIONREAD bytes; stops
// early at EAGAIN or EOF), then closes it. Bounded, so a grandchild that
// keeps writing cannot keep us here.
void DrainAndClose(UniqueFd* fd, std::string* sink, char* buf, size_t size) {
  int avail = 0;
  if (fd->valid() && ioctl(fd->get(), FIONREAD, &avail) != 0) avail = 0;
  size_t left = static_cast<size_t>(std::max(avail, 0));
  while (fd->valid() && left > 0) {
    ssize_t r = read(fd->get(), buf, std::min(size, left));
    if (r > 0) {
      sink->append(buf, static_cast<size_t>(r));
      left -= static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EOF, EAGAIN or an error
    }
  }
  fd->reset();
}

int PollWait(int64_t leftMs) { return static_cast<int>(std::clamp<int64_t>(leftMs, 0, INT_MAX)); }

}  // namespace

ErrorInfo Spawn(const SpawnOptions& opts, SpawnResult* result, bool* restored,
                std::function<void(pid_t)> onPid, std::function<void(pid_t)> beforeReap) {
  *restored = true;
  if (opts.argv.empty()) return ErrorInfo::Errno(EINVAL, "spawn", "empty argv");
  Pipes p;
  if (!MakePipe(&p.inR, &p.inW) || !MakePipe(&p.outR, &p.outW) || !MakePipe(&p.errR, &p.errW))
    return Fail("pipe2", "create pipes");
  pid_t pid = -1;
  ErrorInfo err = RunInNetns(opts.nsFd, [&] { return DoSpawn(opts, &p, &pid); }, restored);
  if (pid <= 0) return err.failed() ? err : ErrorInfo::Errno(ECHILD, "spawn", "spawn failed");
  if (onPid) onPid(pid);
  // Tells us when the child itself exits, whoever still holds its pipes.
  // Linux >= 5.3; without it we fall back to waiting for EOF.
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  // The child owns its copies now; close ours so EOF can be seen.
  p.inR.reset();
  p.outW.reset();
  p.errW.reset();
  if (!opts.hasStdin) p.inW.reset();
  for (UniqueFd* f : {&p.inW, &p.outR, &p.errR})
    if (f->valid()) fcntl(f->get(), F_SETFL, fcntl(f->get(), F_GETFL) | O_NONBLOCK);

  // The child is unreaped until the end, so its pid (= pgid) stays ours.
  auto killGroup = [pid] {
    if (kill(-pid, SIGKILL) != 0) kill(pid, SIGKILL);
  };
  size_t written = 0;
  const int64_t deadline = opts.timeoutMs > 0 ? NowMs() + opts.timeoutMs : 0;
  bool killed = false;
  int64_t killedAt = 0;
  char buf[65536];
  // With a pidfd the loop runs until the child exits: one that closes its
  // pipes and then hangs must still meet its timeout and cancellation.
  while (pidfd.valid() || p.outR.valid() || p.errR.valid() || p.inW.valid()) {
    pollfd fds[5];
    int n = 0;
    int idxIn = -1, idxOut = -1, idxErr = -1, idxPid = -1, idxCancel = -1;
    if (p.inW.valid()) { idxIn = n; fds[n++] = {p.inW.get(), POLLOUT, 0}; }
    if (p.outR.valid()) { idxOut = n; fds[n++] = {p.outR.get(), POLLIN, 0}; }
    if (p.errR.valid()) { idxErr = n; fds[n++] = {p.errR.get(), POLLIN, 0}; }
    if (pidfd.valid()) { idxPid = n; fds[n++] = {pidfd.get(), POLLIN, 0}; }
    if (opts.cancelFd >= 0) { idxCancel = n; fds[n++] = {opts.cancelFd, POLLIN, 0}; }
    int wait = -1;
    if (deadline && !killed) {
      int64_t left = deadline - NowMs();
      if (left <= 0) {
        killGroup();
        killed = true;
        killedAt = NowMs();
        result->timedOut = true;
        p.inW.reset();
        continue;
      }
      wait = PollWait(left);
    } else if (killed && !pidfd.valid()) {
      // No pidfd: a member that left the group may hold the pipes; stop after a grace.
      int64_t left = killedAt + 1000 - NowMs();
      if (left <= 0) break;
      wait = PollWait(left);
    }
    int rc = poll(fds, n, wait);
    if (rc < 0) {
      if (errno == EINTR) continue;
      err = Fail("poll", "poll child pipes");
      killGroup();
      break;
    }
    if (rc == 0) continue;  // deadline handled at the top
    if (idxCancel >= 0 && fds[idxCancel].revents) {
      // The env is going away: don't wait for the child or anything it started.
      killGroup();
      err = ErrorInfo::Errno(ECANCELED, "spawn", "spawn cancelled: the addon is shutting down");
      break;
    }
    if (idxIn >= 0 && fds[idxIn].revents) {
      if (fds[idxIn].revents & (POLLERR | POLLHUP)) {
        p.inW.reset();  // child closed stdin; the rest is dropped
      } else {
        ssize_t w = write(p.inW.get(), opts.stdinData.data() + written, opts.stdinData.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == opts.stdinData.size()) p.inW.reset();
      }
    }
    for (auto [idx, fd, sink] : {std::tuple{idxOut, &p.outR, &result->out}, std::tuple{idxErr, &p.errR, &result->err}}) {
      if (idx < 0 || !fds[idx].revents) continue;
      ssize_t r = read(fd->get(), buf, sizeof buf);
      if (r > 0) sink->append(buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) fd->reset();
    }
    if (idxPid >= 0 && fds[idxPid].revents) {
      // The child has exited: everything it wrote is in the pipes now. Take
      // that and stop; a grandchild still holding a pipe must not keep the
      // call open.
      DrainAndClose(&p.outR, &result->out, buf, sizeof buf);
      DrainAndClose(&p.errR, &result->err, buf, sizeof buf);
      p.inW.reset();
      break;
    }
  }
  if (beforeReap) beforeReap(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      if (!err.failed()) err = Fail("waitpid", "wait for child");
      return err;
    }
  }
  if (WIFEXITED(status)) {
    result->code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result->code = -1;
    result->signal = WTERMSIG(status);
  }
  return err;
}

}  // namespace podwire::netns
