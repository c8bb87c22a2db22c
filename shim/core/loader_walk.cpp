#include "shim/core/loader_walk.h"

#include <pthread.h>

namespace torchseal {
namespace {

// A plain pthread mutex: constant-initialised, usable from constructors and
// from the fork handlers below.
pthread_mutex_t g_walk = PTHREAD_MUTEX_INITIALIZER;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

void prepare() { pthread_mutex_lock(&g_walk); }
void parent() { pthread_mutex_unlock(&g_walk); }
// The forking thread holds it in the child too; no other thread exists.
void child() { pthread_mutex_unlock(&g_walk); }

void install() { pthread_atfork(prepare, parent, child); }

// At load, before the handlers of the locks that are held around a walk
// (got_patch.cpp, priority 102): prepare handlers run last-registered
// first, so a fork takes those locks before this one, in their order.
__attribute__((constructor(101))) void install_at_load() { pthread_once(&g_once, install); }

}  // namespace

LoaderWalkGuard::LoaderWalkGuard() {
  pthread_once(&g_once, install);
  pthread_mutex_lock(&g_walk);
}

LoaderWalkGuard::~LoaderWalkGuard() { pthread_mutex_unlock(&g_walk); }

}  // namespace torchseal
