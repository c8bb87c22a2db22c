// fork_exec CMD...: an active CUDA process (one live allocation freed before
// exit) runs CMD through fork + execvp and waits for it. The exec'd program
// inherits LD_PRELOAD but never calls CUDA, so it must write no file; only
// this process's own files appear.
//
// EXPECT: exit 0

#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *p = nullptr;
  CHECK(cudaMalloc(&p, 4096));
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(cudaFree(p));
  std::printf("child_status=%d\n", status);
  example::print_calls();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3;
}
