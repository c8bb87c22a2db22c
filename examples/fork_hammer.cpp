// fork_hammer [FORKS [cuda]]: two threads hammer cudaMalloc/cudaFree (so the
// fork usually lands while a thread is inside the shim, holding its locks)
// while the main thread forks FORKS times (default 40). Every even child goes
// through the shim's locks (torchseal_step(), torchseal_dump(): the live
// table, stack table, misc and report locks) and exits normally (destructors
// run); every odd child exits without calling anything (it writes no file).
// A child that has not finished within 10 s is deadlocked: its stacks go to
// stderr (gdb, where installed), it is killed and the program exits 4.
// With `cuda`, even children call cudaMalloc/cudaFree instead. That is not
// part of the test: CUDA itself is not fork-safe once initialised (real CUDA
// fails, simcuda deadlocks on its own driver mutex, which has no atfork
// handler), so it measures the simulator, not torchseal.
// Prints `forks=N`, `cuda_children=N` (children that entered the shim), `deadlocked=N`.
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
  std::thread t1(hammer), t2(hammer);
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
  std::printf("forks=%d\ncuda_children=%d\ndeadlocked=%d\nfailed=%d\n", forks, cuda_children,
              deadlocked, failed);
  return deadlocked ? 4 : failed ? 3 : 0;
}
