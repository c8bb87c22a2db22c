/* A native frame with debug info under a Python program: prog.py calls
 * ts_native_alloc through ctypes, so the leak's stack has the Python line
 * and this file's line, each resolved in a bare root only if the bundled
 * libdw works. The runtime is looked up at run time: the library links no
 * CUDA, like an extension that reaches the runtime through torch. */
#include <dlfcn.h>
#include <stddef.h>

typedef int (*malloc_fn)(void **, size_t);

__attribute__((noinline)) int ts_native_alloc(size_t bytes) {
  void *rt = dlopen("libcudart.so.13", RTLD_NOW);
  if (!rt) return -1;
  malloc_fn cuda_malloc = (malloc_fn)dlsym(rt, "cudaMalloc");
  void *p = NULL;
  int rc = cuda_malloc ? cuda_malloc(&p, bytes) : -1;  /* NATIVE-LEAK */
  return rc;
}
