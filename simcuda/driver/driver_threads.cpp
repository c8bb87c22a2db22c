// The driver's own threads. A real libcuda starts helper threads that a
// process keeps while CUDA is in use: one named "cuda00001400006" once the
// driver is initialized and one "cuda-EvtHandlr" for each context, both
// asleep in poll() (NVIDIA does not document them; they show in every CUDA
// process's thread list). What they change for a tool: a CUDA process is
// never single-threaded, so glibc's single-thread fast paths (its locks
// without a locked instruction) are off there whether or not the tool
// starts a thread of its own. simcuda's threads only sleep: they run no
// callbacks and take no lock.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "driver_internal.h"

namespace simcuda {
namespace {

void *sleep_until_woken(void *arg)
{
    int fd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    pollfd p{fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    // The read takes the wake-up (what orders the waker's write before the
    // close, for ThreadSanitizer too).
    uint64_t v;
    while (read(fd, &v, sizeof v) < 0 && errno == EINTR) {
    }
    close(fd);
    return nullptr;
}

}  // namespace

DriverThread start_driver_thread(const char *name)
{
    DriverThread t;
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0)
        return t;
    // Signals stay with the application's threads: a handler it installs
    // never runs on a thread it does not know.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_t tid;
    void *arg = reinterpret_cast<void *>(static_cast<intptr_t>(fd));
    int rc = pthread_create(&tid, &attr, sleep_until_woken, arg);
    if (rc == EINVAL) {
        // glibc takes static TLS and the thread descriptor out of the
        // stack: a process with a large static TLS needs glibc's default.
        pthread_attr_destroy(&attr);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&tid, &attr, sleep_until_woken, arg);
    }
    bool ok = rc == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!ok) {
        close(fd);
        return t;
    }
    pthread_setname_np(tid, name);
    t.wake_fd = fd;
    t.owner = getpid();
    return t;
}

void stop_driver_thread(DriverThread &t)
{
    // A forked child has the descriptor but not the thread: waking it would
    // end the parent's, so the child only closes its copy.
    if (t.wake_fd >= 0 && t.owner == getpid()) {
        uint64_t one = 1;
        while (write(t.wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
        }
    } else if (t.wake_fd >= 0) {
        close(t.wake_fd);
    }
    t = DriverThread{};
}

}  // namespace simcuda
