/* A library that refers to the CUDA runtime and driver without calling
 * them: what a late-started shim patches in every object loaded after it
 * (tests/reliability/dlopen_race.c loads and unloads it in a loop). The
 * references are weak and nothing defines them here, so a slot is non-null
 * only once the shim has written its hook into it. */
extern int cudaMalloc(void) __attribute__((weak));
extern int cudaFree(void) __attribute__((weak));
extern int cudaMallocAsync(void) __attribute__((weak));
extern int cudaFreeAsync(void) __attribute__((weak));
extern int cudaMallocHost(void) __attribute__((weak));
extern int cudaFreeHost(void) __attribute__((weak));
extern int cudaMallocManaged(void) __attribute__((weak));
extern int cudaHostAlloc(void) __attribute__((weak));
extern int cudaHostRegister(void) __attribute__((weak));
extern int cudaHostUnregister(void) __attribute__((weak));
extern int cuMemAlloc_v2(void) __attribute__((weak));
extern int cuMemFree_v2(void) __attribute__((weak));
extern int cuMemAllocAsync(void) __attribute__((weak));
extern int cuMemFreeAsync(void) __attribute__((weak));
extern int cuMemCreate(void) __attribute__((weak));
extern int cuMemRelease(void) __attribute__((weak));
extern int cuMemMap(void) __attribute__((weak));
extern int cuMemUnmap(void) __attribute__((weak));
extern int cuGetProcAddress_v2(void) __attribute__((weak));
extern int cuMemAllocManaged(void) __attribute__((weak));

/* How many of the names resolve now. Each test reads the name's GOT slot
 * (a GLOB_DAT relocation, as a call through a function pointer would). */
int cuda_refs_patched(void) {
  int n = 0;
  n += cudaMalloc != 0;
  n += cudaFree != 0;
  n += cudaMallocAsync != 0;
  n += cudaFreeAsync != 0;
  n += cudaMallocHost != 0;
  n += cudaFreeHost != 0;
  n += cudaMallocManaged != 0;
  n += cudaHostAlloc != 0;
  n += cudaHostRegister != 0;
  n += cudaHostUnregister != 0;
  n += cuMemAlloc_v2 != 0;
  n += cuMemFree_v2 != 0;
  n += cuMemAllocAsync != 0;
  n += cuMemFreeAsync != 0;
  n += cuMemCreate != 0;
  n += cuMemRelease != 0;
  n += cuMemMap != 0;
  n += cuMemUnmap != 0;
  n += cuGetProcAddress_v2 != 0;
  n += cuMemAllocManaged != 0;
  return n;
}
