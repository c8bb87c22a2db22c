// Dumps from every direction at once, for ThreadSanitizer. Worker threads
// allocate and free (live table, stack table, history buffers) while
//   - one thread asks for API dumps (torchseal_dump: written on that thread),
//   - one sends SIGUSR1 (signal dumps, written by the writer thread),
//   - one makes impossible allocations (the OOM dump, also the writer's),
//   - one marks training steps (per-site step samples),
// then the exit report runs while the writer thread finishes. The program
// links the shim (TSan cannot be preloaded). The work runs in a child process
// so that the parent can check the child's exit report, written from the
// shim's ELF destructor, and remove the output directory. Exit 0 when every
// dump was written; a race makes TSan exit the child with 66.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "torchseal.h"

namespace {

constexpr int kWorkers = 4;
constexpr int kPairs = 5000;

void must(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "dump_race: %s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void worker(int id) {
  std::vector<void *> held;
  for (int i = 0; i < kPairs; ++i) {
    void *p = nullptr;
    must(cudaMalloc(&p, 512u * (1 + (i + id) % 16)), "cudaMalloc");
    held.push_back(p);
    if (held.size() > 32) {  // some stay live for a while, so dumps see them
      must(cudaFree(held.front()), "cudaFree");
      held.erase(held.begin());
    }
  }
  for (void *p : held) must(cudaFree(p), "cudaFree");
}

int run() {
  void *warm = nullptr;  // first CUDA call: the shim starts here
  must(cudaMalloc(&warm, 64), "cudaMalloc");
  must(cudaFree(warm), "cudaFree");

  std::atomic<bool> stop{false};
  std::atomic<int> api_failures{0}, api_dumps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers; ++t) threads.emplace_back(worker, t);
  std::thread dumper([&] {
    while (!stop.load()) {
      if (torchseal_dump("tsan") != 0) api_failures.fetch_add(1);
      api_dumps.fetch_add(1);
    }
  });
  std::thread signaller([&] {
    while (!stop.load()) {
      kill(getpid(), SIGUSR1);
      usleep(5000);
    }
  });
  std::thread oom([&] {
    void *p = nullptr;
    if (cudaMalloc(&p, size_t(1) << 60) == cudaSuccess) cudaFree(p);
  });
  std::thread stepper([&] {
    while (!stop.load()) {
      torchseal_step();
      usleep(2000);
    }
  });

  for (auto &t : threads) t.join();
  oom.join();
  stop.store(true);
  dumper.join();
  signaller.join();
  stepper.join();

  std::printf("dump_race: %d API dumps, %d failed\n", api_dumps.load(), api_failures.load());
  std::fflush(stdout);
  return api_failures.load() == 0 && api_dumps.load() > 0 ? 0 : 1;
}

}  // namespace

int main() {
  char dir[] = "/tmp/tseal-tsan-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::string prefix = std::string(dir) + "/p";
  setenv("TORCHSEAL_OUTPUT", prefix.c_str(), 1);
  pid_t child = fork();  // before any CUDA call: the parent stays inert
  if (child == 0) std::exit(run());
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) return 1;
  bool exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  bool report = access((prefix + ".json").c_str(), R_OK) == 0;
  bool dumps = access((prefix + ".1.json").c_str(), R_OK) == 0;
  if (!exited) std::fprintf(stderr, "dump_race: child status 0x%x\n", status);
  if (!report || !dumps) std::fprintf(stderr, "dump_race: no exit report or no dump in %s\n", dir);
  std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "dump_race: could not remove %s\n", dir);
  return exited && report && dumps ? 0 : 1;
}
