/* dlsym_x86_64.S: the dlsym libuvmchunk-dlsym.so exports. It asks uvmc_dlsym_target which function
 * answers this lookup (passing the caller's return address, which tells whose lookup it is), then
 * jumps there: the next dlsym still sees the caller's return address, so RTLD_NEXT keeps the
 * caller's scope for every lookup that is not redirected. */
    .text
    .globl  dlsym
    .type   dlsym, @function
dlsym:
    .cfi_startproc
    endbr64
    movq    (%rsp), %rdx            /* the caller's return address: third argument */
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                /* 16-byte alignment for the call */
    .cfi_adjust_cfa_offset 8
    call    uvmc_dlsym_target       /* hidden, same object: a direct call */
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    jmp     *%rax
    .cfi_endproc
    .size   dlsym, .-dlsym

    .section .note.GNU-stack, "", @progbits
