// setns enter+return cost on one dedicated thread (what a netns job pays to
// switch), for bench/netlink.ts. Usage: setns_bench NETNS_PATH N
#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

static double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int target = open(argv[1], O_RDONLY | O_CLOEXEC);
  int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (target < 0 || orig < 0) return 1;
  int n = std::atoi(argv[2]);
  std::vector<double> batch;
  // Time batches of 100 round trips (clock reads would dominate single ones).
  for (int i = 0; i < n / 100; ++i) {
    double t0 = NowUs();
    for (int j = 0; j < 100; ++j) {
      if (setns(target, CLONE_NEWNET) != 0 || setns(orig, CLONE_NEWNET) != 0) return 1;
    }
    batch.push_back((NowUs() - t0) / 100);
  }
  std::sort(batch.begin(), batch.end());
  std::printf("median_us=%.3f\n", batch[batch.size() / 2]);
  close(target);
  close(orig);
  return 0;
}
