/*
 * cmov_canary.c - proves the emulator enforces the K6's instruction set.
 *
 * A freestanding static i386 program (no C library, its own _start, raw
 * `int $0x80` system calls) that executes one cmov, an instruction of the
 * P6 generation that the AMD K6 and the Pentium lack.  On a CPU (or CPU
 * model) without cmov it dies of SIGILL before printing "survived" (a shell
 * sees status 132); where cmov exists it says so and exits 0.  The test
 * runner expects the SIGILL under `qemu-i386 -cpu pentium`: if this ever
 * survives there, a pass of the K6 suite would prove nothing.
 *
 * Build: $(CC) -std=c11 -O2 -march=i586 -ffreestanding -fno-stack-protector
 *        -fno-pie -no-pie -static -nostdlib cmov_canary.c -o cmov_canary
 */
#ifndef __i386__
#error "cmov_canary.c is a 32-bit x86 program"
#endif

#include <stddef.h>

#define SYS_write 4
#define SYS_exit_group 252

static long sys_write(const char *buf, size_t len)
{
    long r;
    __asm__ __volatile__("int $0x80"
                         : "=a"(r)
                         : "0"((long)SYS_write), "b"(1L), "c"(buf), "d"(len)
                         : "memory");
    return r;
}

static __attribute__((noreturn)) void sys_exit_group(int code)
{
    for (;;)
        __asm__ __volatile__("int $0x80" : : "a"((long)SYS_exit_group), "b"((long)code) : "memory");
}

static void say(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    sys_write(s, n);
}

__attribute__((noreturn, used)) void cmov_canary_main(void);

__attribute__((noreturn, used)) void cmov_canary_main(void)
{
    say("cmov canary: executing cmove (a K6 dies here with SIGILL)\n");
    unsigned value = 0, one = 1;
    /* if (value == 0) value = one;  -- by cmove, so it really executes:
     * the test sets ZF, cmove copies on ZF.  Written in asm because the
     * compiler must never emit cmov for -march=i586. */
    __asm__ __volatile__("testl %0, %0\n\t"
                         "cmovel %1, %0"
                         : "+r"(value)
                         : "r"(one)
                         : "cc");
    if (value != 1) {
        say("cmov canary: cmove executed but computed the wrong value\n");
        sys_exit_group(2);
    }
    say("cmov canary: survived: this CPU (model) has cmov\n");
    sys_exit_group(0);
}

/* Process entry: no return address on the stack, so align it for the
 * psABI and call the C body, which never returns. */
__asm__(".pushsection .text\n"
        ".globl _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "    xorl %ebp, %ebp\n"
        "    andl $-16, %esp\n"
        "    call cmov_canary_main\n"
        "    hlt\n"
        ".size _start, . - _start\n"
        ".popsection\n");
