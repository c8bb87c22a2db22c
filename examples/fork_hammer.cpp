// fork_hammer [FORKS [cuda]]: two threads hammer cudaMalloc/cudaFree (so the
// fork usually lands while a thread is inside the shim, holding its locks)
// and a third opens and closes intervals (torchseal_start, torchseal_stop: a
// report written under the interval lock, into iv/), while the main thread
// forks FORKS times (default 40). Every even child goes through the shim's
// locks (torchseal_step(), torchseal_dump(): the live table, stack table, misc
// and report locks; an interval of its own; a dlopen, which the shim's loader
// walks see) and exits normally (destructors run); every odd child exits
// without calling anything (it writes no file). No thread of the parent
// dlcloses: glibc's fork does not take the atexit list's lock that dlclose
// holds, so a child's exit() would wait forever, with or without torchseal.
// FORK_HAMMER_INTERVALS=0 leaves the interval thread out (the sanitizer
// runs: their allocator is not fork-safe, tests/reliability/run.py).
// A child that has not finished within 10 s is deadlocked: its stacks go to
// stderr (gdb, where installed), it is killed and the program exits 4.
// With `cuda`, even children call cudaMalloc/cudaFree instead. That is not
// part of the test: CUDA itself is not fork-safe once initialised (real CUDA
// fails, simcuda deadlocks on its own driver mutex, which has no atfork
// handler), so it measures the simulator, not torchseal.
// Prints `forks=N`, `cuda_children=N` (children that entered the shim), `deadlocked=N`,
// `network_libs=N` (mapped segments of libdebuginfod or libcurl: 0 expected).
//
// EXPECT: exit 0

#include "common.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <vector>

#include "torchseal.h"  // the types only: the functions are found with dlsym

namespace {
std::atomic<bool> stop{false};

void hammer() {
  while (!stop.load(std::memory_order_relaxed)) {
    void *p = nullptr;
    CHECK(cudaMalloc(&p, 4096));
    CHECK(cudaFree(p));
  }
}

// A deadlock seen once in CI is only fixable with the stuck child's stacks.
// gdb without our LD_PRELOAD: under the sanitizer runtimes it hangs.
void print_stacks(pid_t pid) {
  char cmd[160];
  std::snprintf(cmd, sizeof cmd,
                "command -v gdb >/dev/null && LD_PRELOAD= timeout 30 gdb -q -nx -batch -p %d "
                "-ex 'thread apply all bt' 1>&2 2>/dev/null", static_cast<int>(pid));
  if (std::system(cmd) != 0) std::fprintf(stderr, "fork_hammer: no stacks (gdb missing or failed)\n");
}

// Not otherwise loaded by this program; part of glibc on every distribution.
constexpr const char *kLoadable = "libanl.so.1";

using StartFn = int (*)(const char *);
using StopFn = long long (*)();

void intervals(StartFn start, StopFn stop_fn) {
  while (!stop.load(std::memory_order_relaxed)) {
    if (start("iv/parent") == 0) stop_fn();
    usleep(500);
  }
}

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
}  // namespace

int main(int argc, char **argv) {
  int forks = argc > 1 ? std::atoi(argv[1]) : 40;
  bool with_cuda = argc > 2 && std::strcmp(argv[2], "cuda") == 0;
  void *warm = nullptr;
  CHECK(cudaMalloc(&warm, 64));
  CHECK(cudaFree(warm));
  auto start = reinterpret_cast<StartFn>(dlsym(RTLD_DEFAULT, "torchseal_start"));
  auto stop_fn = reinterpret_cast<StopFn>(dlsym(RTLD_DEFAULT, "torchseal_stop"));
  std::thread t1(hammer), t2(hammer), t3;
  const char *iv = std::getenv("FORK_HAMMER_INTERVALS");
  if (start && stop_fn && !(iv && std::strcmp(iv, "0") == 0))
    t3 = std::thread(intervals, start, stop_fn);
  int deadlocked = 0, failed = 0, cuda_children = 0;
  for (int i = 0; i < forks; ++i) {
    bool use_cuda = (i % 2) == 0;
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Yama: our gdb may attach (print_stacks)
      if (use_cuda && with_cuda) {
        void *p = nullptr;
        if (cudaMalloc(&p, 1 << 16) != cudaSuccess) _exit(5);
        if (cudaFree(p) != cudaSuccess) _exit(6);
      } else if (use_cuda) {
        auto step = reinterpret_cast<decltype(&torchseal_step)>(dlsym(RTLD_DEFAULT, "torchseal_step"));
        auto dump = reinterpret_cast<decltype(&torchseal_dump)>(dlsym(RTLD_DEFAULT, "torchseal_dump"));
        if (step) step();
        if (dump && dump("fork child") != 0) _exit(7);
        if (start && stop_fn) {
          char prefix[64];
          std::snprintf(prefix, sizeof prefix, "iv/child-%d", static_cast<int>(getpid()));
          if (start(prefix) == 0) stop_fn();
        }
        if (void *h = dlopen(kLoadable, RTLD_NOW | RTLD_LOCAL)) dlclose(h);  // alone: no race
      }
      std::exit(0);  // runs destructors: the child's report is written here
    }
    if (pid < 0) return 2;
    cuda_children += use_cuda;
    double deadline = now() + 10;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now() < deadline) usleep(2000);
    if (r == 0) {
      ++deadlocked;
      std::fprintf(stderr, "fork_hammer: child %d (fork %d) deadlocked; killing it\n",
                   static_cast<int>(pid), i);
      print_stacks(pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      std::fprintf(stderr, "fork_hammer: child %d ended with status %#x\n",
                   static_cast<int>(pid), status);
    }
  }
  stop.store(true);
  t1.join();
  t2.join();
  if (t3.joinable()) t3.join();
  // What the shim's libraries brought into this process by now (its reports
  // have symbolized): Debian's libdw would have loaded libdebuginfod and
  // libcurl, whose exit handlers hung forked children (shim/bundled/bundle.py).
  int network_libs = 0;
  if (FILE *maps = std::fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, maps))
      network_libs += std::strstr(line, "libdebuginfod") || std::strstr(line, "libcurl");
    std::fclose(maps);
  }
  std::printf("forks=%d\ncuda_children=%d\ndeadlocked=%d\nfailed=%d\nnetwork_libs=%d\n", forks,
              cuda_children, deadlocked, failed, network_libs);
  return deadlocked ? 4 : failed ? 3 : 0;
}
