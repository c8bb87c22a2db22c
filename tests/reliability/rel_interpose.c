/* A host-side interposer, as profilers and allocators ship them: it defines
 * puts() and rel_hello() and forwards with dlsym(RTLD_NEXT, ...). Under
 * torchseal (which interposes dlsym itself) RTLD_NEXT must still be resolved
 * relative to THIS library, or the forward would loop or hit the wrong one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

static int g_puts_calls;

int puts(const char *s) {
  int (*next)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
  ++g_puts_calls;
  if (!next || next == puts) return -1000; /* would recurse */
  return next(s);
}

int rel_hello(void) {
  int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "rel_hello");
  if (!next || next == rel_hello) return -1;
  return next() + 10;
}

int rel_puts_calls(void) { return g_puts_calls; }
