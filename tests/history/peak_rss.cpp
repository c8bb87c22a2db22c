// peak_rss CMD [ARGS...]: runs CMD (stdout to /dev/null) and prints its peak
// RSS in KiB on stdout; exits with CMD's status.
//
// Why not Python's wait4/getrusage: a child's ru_maxrss also counts the
// memory it had between fork and exec, i.e. the parent's RSS, and a Python
// interpreter is larger than the reader being measured. Forked from this
// small program, the figure is the command's own.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: peak_rss CMD [ARGS...]\n");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("peak_rss: fork");
    return 2;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    execvp(argv[1], argv + 1);
    std::perror(argv[1]);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) {
    std::perror("peak_rss: wait4");
    return 2;
  }
  std::printf("%ld\n", usage.ru_maxrss);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
