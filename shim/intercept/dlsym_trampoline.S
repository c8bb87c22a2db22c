/* dlsym(handle, name): ask torchseal_dlsym_filter whether this is a driver
   function we wrap; if not, *tail-jump* to glibc's dlsym. A tail jump keeps
   the caller's return address on the stack, which glibc uses to resolve
   RTLD_NEXT relative to the calling object; a normal C++ forwarder would make
   every RTLD_NEXT lookup relative to libtorchseal instead. */
#if defined(__x86_64__)
        .text
        .globl  dlsym
        .type   dlsym, @function
dlsym:
        .cfi_startproc
        pushq   %rdi
        .cfi_adjust_cfa_offset 8
        pushq   %rsi
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        call    torchseal_dlsym_filter
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %rsi
        .cfi_adjust_cfa_offset -8
        popq    %rdi
        .cfi_adjust_cfa_offset -8
        testq   %rax, %rax
        jz      1f
        ret
1:
        jmp     *torchseal_real_dlsym_ptr(%rip)
        .cfi_endproc
        .size   dlsym, .-dlsym
        .section .note.GNU-stack,"",@progbits
#else
#error "dlsym trampoline is implemented for x86-64 only"
#endif
