/* torchseal.h: the C API of libtorchseal.so, the preloaded CUDA leak
 * detector (the README's "Quick start" and docs/ say how to use it).
 *
 * Every function is exported by libtorchseal.so with C linkage, is cheap
 * and thread-safe, and does nothing harmful when called before the first
 * CUDA call (the shim is inert until then) or when the shim is not loaded
 * at all, provided the caller looks the symbols up at run time:
 *
 *     int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "torchseal_active");
 *     if (active && active()) ...
 *
 * Linking against libtorchseal.so directly is fine too, when the program
 * always runs under it. From Python, `import torchseal` binds these same
 * functions with ctypes (python/torchseal; a test checks the bindings
 * against this header).
 */
#ifndef TORCHSEAL_H
#define TORCHSEAL_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TORCHSEAL_API __attribute__((visibility("default")))
#else
#define TORCHSEAL_API
#endif

/* 1 when the shim is recording in this process, else 0. */
TORCHSEAL_API int torchseal_active(void);

/* One training step ended: live bytes per allocation site are sampled for
 * the growth verdict, and Python holders are scanned at this safe point
 * (call it with the GIL held, outside any CUDA call). */
TORCHSEAL_API void torchseal_step(void);

/* A named mark on the timeline (HTML, exports, `torchseal report`).
 * `label` is copied; NULL is ignored. */
TORCHSEAL_API void torchseal_mark(const char *label);

/* Writes a report now (P.<n>.json and P.<n>.txt) and keeps recording.
 * `reason` is informational. Returns 0, or -1 when nothing was written
 * (not recording, or the files could not be written). */
TORCHSEAL_API int torchseal_dump(const char *reason);

/* The highest total of live bytes since the previous call with
 * restart != 0 (or since recording began); restart != 0 then starts a new
 * window at the bytes live now. The report's peak stays the process's.
 * -1 before the first CUDA call. */
TORCHSEAL_API long long torchseal_peak_bytes(int restart);

/* Starts an interval report with the output prefix `prefix` (the shim
 * activates if it was loaded late): what is live now is pre-existing, and
 * what the interval allocates and leaves live is judged at
 * torchseal_stop(). Returns 0, or -1 when the shim cannot record. */
TORCHSEAL_API int torchseal_start(const char *prefix);

/* Ends the interval: writes its report to the prefix given to
 * torchseal_start() and returns the number of leaked allocations, or -1
 * (no interval, no report). */
TORCHSEAL_API long long torchseal_stop(void);

/* What `torchseal attach PID` calls inside the process it loaded the shim
 * into (docs/attach.md); not meant for programs. `request` holds
 * "key=value" lines (mode, seconds or steps, prefix, control, deadline).
 * Any thread may call it: it only queues the late start for the main
 * thread's next Python safe point. Returns 0 when queued, -1 otherwise
 * (a second call, a malformed request, no Python in the process). */
TORCHSEAL_API int torchseal_attach(const char *request);

#ifdef __cplusplus
}
#endif

#endif /* TORCHSEAL_H */
