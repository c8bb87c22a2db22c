/* A host that loads libunwind and libdw itself, after the shim has loaded
 * its bundled copies: it must get its own (the system's), never ours. Prints
 * the file each symbol came from, and whether the bundled copies are mapped;
 * tests/bare_root/run.py checks the lines. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void which(const char *soname, const char *symbol) {
  void *h = dlopen(soname, RTLD_NOW);
  void *fn = h ? dlsym(h, symbol) : NULL;
  Dl_info info;
  if (fn && dladdr(fn, &info))
    printf("%s=%s\n", soname, info.dli_fname);
  else
    printf("%s=unavailable\n", soname);
}

int main(void) {
  void *p = NULL;
  if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) return 2;
  which("libunwind.so.8", "unw_backtrace");
  which("libdw.so.1", "dwfl_begin");
  char line[4096];
  FILE *maps = fopen("/proc/self/maps", "r");
  int bundled = 0; /* mapped segments of the bundled copies */
  while (maps && fgets(line, sizeof line, maps))
    if (strstr(line, "libunwind-torchseal.so.8") || strstr(line, "libdw-torchseal.so.1")) bundled++;
  if (maps) fclose(maps);
  printf("bundled_mapped=%d\n", bundled > 0);
  return 0;
}
