// Network-namespace primitives with no N-API in sight, so the same code runs
// in the addon and in the ctest binaries.
//
// Thread model: setns(2) changes the namespace of the *calling thread* only.
// Nothing here may be called on the JS thread or a libuv pool thread except
// OpenNetns/StatNetns/Unmount, which never switch. The switching functions
// are meant for the addon's own short-lived job threads (see jobs.h): they
// save the thread's netns as an fd, switch, and restore by fd. When the
// restore fails the thread is "poisoned": the caller learns it through
// `restored == false` and the job thread exits without running anything else.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../common/error_info.h"
#include "../common/fd.h"

namespace podwire::netns {

struct NsId {
  uint64_t dev = 0;
  uint64_t ino = 0;
};

// Opens `path` read-only and checks that it is an nsfs network-namespace
// file. On failure returns an invalid fd and fills `err`.
UniqueFd OpenNetns(const std::string& path, NsId* id, ErrorInfo* err);

// A close-on-exec duplicate (>= 3) of `fd`, which must be an open network
// namespace fd. Job states own such a dup so that JS closing its fd (and the
// number being reused by another netns) cannot redirect queued work. A
// negative, closed or non-netns fd fails with EBADF.
UniqueFd DupNetnsFd(int fd, ErrorInfo* err);

// (dev, ino) of an open namespace fd.
bool StatNetns(int fd, NsId* id, ErrorInfo* err);

// Runs fn() with the calling thread inside the netns `targetFd`, then
// restores the thread's original netns. `restored` tells whether the thread
// is still usable. Returns fn's error, or the setns failure. A negative
// `targetFd` means "this netns": fn() runs as is, with no switch.
ErrorInfo RunInNetns(int targetFd, const std::function<ErrorInfo()>& fn, bool* restored);

// Creates a new netns persisted at `dir/name` as `ip netns add` does: makes
// `dir` (a shared mount, bind-mounted onto itself when needed), creates the
// file, unshares a new netns on the calling thread and bind-mounts it there.
// Restores the calling thread's netns. Leaves nothing behind on failure.
ErrorInfo CreateNetns(const std::string& dir, const std::string& name, bool* restored);

// Creates a new netns that has no name: unshares on the calling thread,
// opens the new namespace, switches back. The returned fd is its only
// reference; the namespace goes away when the fd (and anything inside) does.
UniqueFd CreateAnonymousNetns(NsId* id, ErrorInfo* err, bool* restored);

// Detaches the mount at `path` and removes the file (`ip netns del`).
ErrorInfo RemoveNetns(const std::string& path);

// Reads or writes a file (used for /proc/sys/net/... of the current netns).
ErrorInfo ReadFile(const std::string& path, std::string* out);
ErrorInfo WriteFile(const std::string& path, const std::string& value);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> env;   // KEY=VALUE
  std::string cwd;                // empty: inherit
  std::string stdinData;
  bool hasStdin = false;
  int64_t timeoutMs = 0;          // 0: none
  int nsFd = -1;                  // -1: spawn in the calling thread's netns
  int cancelFd = -1;              // readable (e.g. an eventfd written at teardown): kill the group, stop, ECANCELED
};

struct SpawnResult {
  int code = -1;       // exit status, -1 when killed by a signal
  int signal = 0;      // terminating signal, 0 when it exited
  bool timedOut = false;
  std::string out;
  std::string err;
};

// Spawns argv inside `nsFd` (the child is created by a thread that switched
// into the netns, so it is born there; the thread switches back right after
// the spawn), feeds stdin, collects stdout/stderr, and reaps the child.
//
// The child leads its own process group (pgid = pid), so the timeout and
// cancellation kill the whole group (grandchildren too, unless they left it
// with setsid/setpgid). The call ends when the child itself has exited
// (learnt through a pidfd): output already in the pipes is read, then it
// returns even if a grandchild still holds stdout/stderr open (its later
// output is not collected). Without pidfd (Linux < 5.3) it waits for EOF.
//
// `onPid` is told the pid once the child runs; `beforeReap` is called just
// before the child is reaped (while its pid, hence its pgid, cannot be
// reused), so a caller that keeps the pid to kill the group can forget it
// safely. Must run on a job thread.
ErrorInfo Spawn(const SpawnOptions& opts, SpawnResult* result, bool* restored,
                std::function<void(pid_t)> onPid = {}, std::function<void(pid_t)> beforeReap = {});

}  // namespace podwire::netns
