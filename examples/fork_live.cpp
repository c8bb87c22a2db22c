// fork_live: the parent holds live allocations (3 x 7777 bytes) when it forks.
// The child allocates for itself, leaks exactly one 12345-byte allocation and
// exits; the parent waits, frees its own, leaks one 54321-byte allocation.
// Each process writes its own files; the child's report must hold none of
// the parent's allocations (no 7777-byte entries).
// Prints `parent_calls=N`, `child_calls=N`, `child_pid=N`.
//
// EXPECT: exit 0

#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

int main() {
  void *held[3];
  for (void *&p : held) CHECK(cudaMalloc(&p, 7777));
  void *pre = nullptr;
  CHECK(cudaMalloc(&pre, 100));
  CHECK(cudaFree(pre));
  long before_fork = example::calls.load();
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    for (int i = 0; i < 10; ++i) {
      void *p = nullptr;
      CHECK(cudaMalloc(&p, 1000 + i));
      CHECK(cudaFree(p));
    }
    void *leak = nullptr;
    CHECK(cudaMalloc(&leak, 12345));
    std::printf("child_calls=%ld\n", example::calls.load() - before_fork);
    std::fflush(stdout);
    return 0;  // normal exit: writes the child's report
  }
  int status = 0;
  waitpid(pid, &status, 0);
  for (void *p : held) CHECK(cudaFree(p));
  void *leak = nullptr;
  CHECK(cudaMalloc(&leak, 54321));
  std::printf("child_pid=%d\nchild_status=%d\n", static_cast<int>(pid), status);
  std::printf("parent_calls=%ld\n", example::calls.load());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3;
}
