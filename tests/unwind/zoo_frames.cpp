#include "zoo_frames.h"

#include <alloca.h>

#include <cstring>

namespace {
// Keeps the compiler from turning calls into jumps or folding frames.
volatile int g_sink;

__attribute__((noinline)) void big_frame(int depth, void (*leaf)(void *), void *arg);

__attribute__((noinline)) void small_frame(int depth, void (*leaf)(void *), void *arg) {
  if (depth <= 0) {
    leaf(arg);
  } else {
    big_frame(depth - 1, leaf, arg);
  }
  g_sink = g_sink + depth;
}

// A frame with a large, rsp-addressed local area and callee-saved spills.
__attribute__((noinline)) void big_frame(int depth, void (*leaf)(void *), void *arg) {
  char buf[1000];
  memset(buf, depth, sizeof buf);
  g_sink = buf[depth % 1000];
  if (depth <= 0) {
    leaf(arg);
  } else if (depth % 3 == 0) {
    zoo_alloca(static_cast<size_t>(depth) * 24, leaf, arg);
  } else {
    small_frame(depth - 1, leaf, arg);
  }
  g_sink = g_sink + buf[(depth * 7) % 1000];
}
}  // namespace

extern "C" {

void zoo_mixed(int depth, void (*leaf)(void *), void *arg) {
  small_frame(depth, leaf, arg);
  g_sink = g_sink + 1;
}

__attribute__((noinline)) void zoo_realigned(void (*leaf)(void *), void *arg) {
  alignas(64) char aligned[256];
  memset(aligned, 1, sizeof aligned);
  g_sink = aligned[reinterpret_cast<size_t>(&aligned) & 63];
  leaf(arg);
  g_sink = g_sink + aligned[7];
}

__attribute__((noinline)) void zoo_alloca(size_t bytes, void (*leaf)(void *), void *arg) {
  auto *p = static_cast<char *>(alloca(bytes + 1));
  memset(p, 2, bytes + 1);
  g_sink = p[bytes / 2];
  small_frame(0, leaf, arg);
  g_sink = g_sink + p[bytes];
}
}

// Hand-written, so that rbp surely holds the counter (a compiler may or may
// not pick rbp); its unwind rule restores rbp from the slot it pushed.
asm(R"(
  .text
  .globl zoo_rbp_counter
  .type zoo_rbp_counter, @function
zoo_rbp_counter:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  pushq %rbx
  .cfi_def_cfa_offset 24
  .cfi_offset %rbx, -24
  pushq %r12
  .cfi_def_cfa_offset 32
  .cfi_offset %r12, -32
  pushq %r13
  .cfi_def_cfa_offset 40
  .cfi_offset %r13, -40
  subq $8, %rsp
  .cfi_def_cfa_offset 48
  movl %edi, %ebx
  movq %rsi, %r12
  movq %rdx, %r13
  xorl %ebp, %ebp
1:
  cmpl %ebx, %ebp
  jge 2f
  movl $2, %edi
  movq %r12, %rsi
  movq %r13, %rdx
  call zoo_mixed@PLT
  incl %ebp
  jmp 1b
2:
  addq $8, %rsp
  .cfi_def_cfa_offset 40
  popq %r13
  .cfi_def_cfa_offset 32
  popq %r12
  .cfi_def_cfa_offset 24
  popq %rbx
  .cfi_def_cfa_offset 16
  popq %rbp
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size zoo_rbp_counter, .-zoo_rbp_counter
)");
