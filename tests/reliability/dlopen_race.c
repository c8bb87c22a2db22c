/* A shim started late (dlopen'ed, then torchseal_start) patches the GOT of
 * every object loaded after it, on its writer thread, while the program
 * goes on loading objects. The writer once looked our hooks up (dlsym,
 * dladdr) inside dl_iterate_phdr: it held the loader's list lock and waited
 * for its load lock, while a dlopen on the main thread held them the other
 * way round, and the program hung. This loads and unloads a library with
 * CUDA references for SECONDS while the writer's 50 ms passes patch it.
 *
 *   dlopen_race CUDART SHIM CUDA_REFS_LIB SECONDS PREFIX
 * CUDART is loaded first (locally): the shim attaches late only to a
 * process that loaded CUDA before it.
 * Exit 0 when every load finished and the shim patched the loads held past
 * a writer pass; a hang is the failure (the test's timeout), and a crash:
 * patched while the loader still relocated it, an object's RELRO page was
 * closed under the loader's own writes. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: dlopen_race CUDART SHIM CUDA_REFS_LIB SECONDS PREFIX\n");
    return 2;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    fprintf(stderr, "dlopen_race: %s\n", dlerror());
    return 1;
  }
  ++argv;
  /* Local: the library's CUDA names stay unresolved until the shim patches
   * them (its hooks would otherwise bind at load). */
  void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!shim) {
    fprintf(stderr, "dlopen_race: %s\n", dlerror());
    return 1;
  }
  int (*start)(const char *) = (int (*)(const char *))dlsym(shim, "torchseal_start");
  long long (*stop)(void) = (long long (*)(void))dlsym(shim, "torchseal_stop");
  if (!start || !stop || start(argv[4]) != 0) {
    fprintf(stderr, "dlopen_race: torchseal_start failed\n");
    return 1;
  }
  double end = now() + atof(argv[3]);
  long loads = 0, holds = 0, patched = 0;
  while (now() < end) {
    void *h = dlopen(argv[2], RTLD_LAZY | RTLD_LOCAL);
    int (*count)(void) = h ? (int (*)(void))dlsym(h, "cuda_refs_patched") : NULL;
    if (!count) {
      fprintf(stderr, "dlopen_race: %s\n", dlerror());
      return 1;
    }
    /* Now and then the library stays loaded past a writer pass, to see
     * that the passes do patch. */
    if (loads % 256 == 0) {
      struct timespec nap = {0, 120 * 1000 * 1000};
      nanosleep(&nap, NULL);
      ++holds;
      patched += count() > 0;
    }
    dlclose(h);
    ++loads;
  }
  stop();
  printf("loads=%ld held=%ld patched=%ld\n", loads, holds, patched);
  /* Each load is a new object, though at the same base as the last one:
   * a pass must patch it again. Half, not all: a hold may end before the
   * writer's next pass on a loaded machine. */
  if (patched * 2 < holds) {
    fprintf(stderr, "dlopen_race: the shim patched %ld of %ld loads held past a pass\n", patched,
            holds);
    return 1;
  }
  return 0;
}
