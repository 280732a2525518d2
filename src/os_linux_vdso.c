/*
 * os_linux_vdso.c - the monotonic clock (os.h: pcm_os_monotonic_ms) read
 * through the kernel's vDSO, found by pcmalloc itself.
 *
 * Why not libc's clock_gettime: a program's resident set counts every page
 * of libc's code it maps, and the kernel maps file pages in blocks around
 * the one touched (up to 64 KiB).  Every slow path reads the clock (decay),
 * and libc's wrapper lies in a block no other call of a small program
 * touches: a preloaded pcmalloc paid up to 16 pages of libc for one call.
 * The vDSO is mapped into every process anyway, and its clock is the one
 * libc's wrapper calls.  Without one (qemu-user, a kernel built without
 * it) the clock is the system call, through libc's syscall(), which
 * pcmalloc calls anyway (os_linux.c), as libc's wrapper would then.
 *
 * The lookup reads the vDSO's ELF image in memory: its dynamic segment's
 * symbol and string tables, and the symbol count from its SysV hash table
 * (every Linux vDSO has one).  Done once, on the first call; two threads
 * racing there find the same answer and store the same word.
 */
#include "os.h"

#include "atomic.h"

#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The kernel's timespec as the vDSO's clock and the system call write it:
 * two longs (on i386 both take the old 32-bit one, which is what this is
 * there, whatever libc's time_t). */
struct vdso_timespec {
    long sec;
    long nsec;
};
typedef int (*vdso_clock_fn)(clockid_t, struct vdso_timespec *);

#if defined(__x86_64__) || defined(__i386__)
#define VDSO_CLOCK_NAME "__vdso_clock_gettime"
#elif defined(__aarch64__)
#define VDSO_CLOCK_NAME "__kernel_clock_gettime"
#endif

#if UINTPTR_MAX == 0xffffffffu
#define ELF_CLASS_HERE ELFCLASS32
#else
#define ELF_CLASS_HERE ELFCLASS64
#endif

/* strcmp's answer to "equal?", without its page of libc (see above). */
static bool same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* The address of the vDSO's runtime, after `delta` (the image's load
 * address less its link address), of a dynamic entry's pointer. */
static const void *at(uintptr_t delta, ElfW(Addr) addr)
{
    return (const void *)(delta + addr);
}

void *pcm_os_vdso_symbol(const char *name)
{
    const ElfW(Ehdr) *elf = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (!elf || memcmp(elf->e_ident, ELFMAG, SELFMAG) != 0 || elf->e_ident[EI_CLASS] != ELF_CLASS_HERE)
        return NULL;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)elf + elf->e_phoff);
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t delta = 0;
    bool loaded = false;
    for (unsigned i = 0; i < elf->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && !loaded) {
            delta = (uintptr_t)elf + ph[i].p_offset - ph[i].p_vaddr;
            loaded = true;
        } else if (ph[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *)((const char *)elf + ph[i].p_offset);
        }
    }
    if (!loaded || !dyn)
        return NULL;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Word) *hash = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB)
            symbols = at(delta, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB)
            strings = at(delta, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_HASH)
            hash = at(delta, dyn->d_un.d_ptr);
    }
    if (!symbols || !strings || !hash)
        return NULL;
    /* hash[1]: nchain, the number of symbols */
    for (ElfW(Word) i = 0; i < hash[1]; i++) {
        const ElfW(Sym) *sym = &symbols[i];
        /* (ELF32_ macros: st_info is a byte of the same shape in both classes) */
        unsigned type = ELF32_ST_TYPE(sym->st_info), bind = ELF32_ST_BIND(sym->st_info);
        if (sym->st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_NOTYPE) ||
            (bind != STB_GLOBAL && bind != STB_WEAK))
            continue;
        if (same_name(strings + sym->st_name, name))
            return (void *)(delta + sym->st_value);
    }
    return NULL;
}

/* The vDSO's clock; 0 not looked up yet, 1 none (the system call then).
 * Relaxed: every thread that looks it up finds the same address, in code
 * that never changes. */
static volatile pcm_word_t vdso_clock;

static vdso_clock_fn find_clock(void)
{
    pcm_word_t fn = pcm_load_relaxed(&vdso_clock);
    if (fn == 0) {
#ifdef VDSO_CLOCK_NAME
        fn = (pcm_word_t)pcm_os_vdso_symbol(VDSO_CLOCK_NAME);
#endif
        if (!fn)
            fn = 1;
        pcm_store_relaxed(&vdso_clock, fn);
    }
    return fn == 1 ? NULL : (vdso_clock_fn)fn;
}

bool pcm_os_vdso_clock_found(void)
{
    return find_clock() != NULL;
}

static struct vdso_timespec read_clock(clockid_t id)
{
    vdso_clock_fn clock = find_clock();
    struct vdso_timespec ts = {0, 0};
    if (!clock || clock(id, &ts) != 0)
        syscall(SYS_clock_gettime, id, &ts);
    return ts;
}

unsigned long pcm_os_monotonic_ms(void)
{
    struct vdso_timespec ts = read_clock(CLOCK_MONOTONIC_COARSE);
    return (unsigned long)ts.sec * 1000u + (unsigned long)(ts.nsec / 1000000);
}

uint32_t pcm_os_monotonic_ns32(void)
{
    struct vdso_timespec ts = read_clock(CLOCK_MONOTONIC);
    return (uint32_t)ts.sec * 1000000000u + (uint32_t)ts.nsec;
}
