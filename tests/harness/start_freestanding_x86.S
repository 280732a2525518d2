/*
 * start_freestanding_x86.S - process entry of the freestanding i386 test
 * program (no C library, no crt files; see platform_freestanding_x86.c).
 *
 * The kernel enters _start with %esp pointing at argc, followed by
 * argv[0..argc-1], NULL, envp[...], NULL, the auxiliary vector.  We hand
 * that address to C, which finds argv and envp, runs the tests and exits.
 */
#ifndef __i386__
#error "start_freestanding_x86.S is the entry point of 32-bit x86 programs only"
#endif

    .text
    .globl _start
    .type _start, @function
_start:
    xorl %ebp, %ebp                 /* outermost frame: stops backtraces */
    movl %esp, %eax                 /* %eax = &argc */
    andl $-16, %esp                 /* the i386 psABI wants 16-byte aligned */
    subl $12, %esp                  /* ... calls: 12 + the 4-byte argument */
    pushl %eax
    call pcm_freestanding_start     /* never returns */
    hlt                             /* privileged: faults if it ever does */
    .size _start, . - _start

    .section .note.GNU-stack, "", @progbits
