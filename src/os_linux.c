/*
 * os_linux.c - the platform layer (os.h) on Linux system calls.
 *
 * Must never happen here: a call to malloc or stdio (this runs inside
 * malloc, before libc's constructors and from ld.so), a lock, static TLS,
 * MAP_FAILED escaping to a caller, or munmap of memory that a lock-free
 * reader may still touch (that is what pcm_os_decommit is for).
 */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- test-only fault injection ---- */

/* Plain statics (see os.h): tests arm them while single-threaded.
 * `calls` == 0 is the disarmed state, the only one release code sees. */
static struct {
    unsigned calls;        /* the kinds counted and failed (enum pcm_os_call) */
    long countdown;        /* the countdown-th next such call fails; 0: it has failed */
    bool persistent;       /* after the first failure, every later one fails too */
    unsigned long seen[3]; /* calls of each kind made while armed */
} pcm_os_fault;

void pcm_os_fault_arm(unsigned calls, long n, bool persistent)
{
    pcm_os_fault.calls = calls & PCM_OS_CALL_ANY;
    pcm_os_fault.countdown = n < 1 ? 1 : n;
    pcm_os_fault.persistent = persistent;
    for (unsigned i = 0; i < 3; i++)
        pcm_os_fault.seen[i] = 0;
}

void pcm_os_fault_disarm(void)
{
    pcm_os_fault.calls = 0;
    pcm_os_fault.countdown = 0;
}

unsigned long pcm_os_fault_seen(unsigned call)
{
    unsigned long total = 0;
    for (unsigned i = 0; i < 3; i++)
        if (call & (1u << i))
            total += pcm_os_fault.seen[i];
    return total;
}

void pcm_os_fail_after(long n)
{
    if (n < 0)
        pcm_os_fault_disarm();
    else
        pcm_os_fault_arm(PCM_OS_CALL_ANY, n, false);
}

__attribute__((noinline, cold)) static bool pcm_os_inject_slow(unsigned call)
{
    if (!(pcm_os_fault.calls & call))
        return false;
    pcm_os_fault.seen[call == PCM_OS_CALL_MMAP ? 0 : call == PCM_OS_CALL_MREMAP ? 1 : 2]++;
    bool fail;
    if (pcm_os_fault.countdown > 1) {
        pcm_os_fault.countdown--;
        fail = false;
    } else if (pcm_os_fault.countdown == 1) {
        pcm_os_fault.countdown = 0; /* the failure has happened */
        fail = true;
    } else {
        fail = pcm_os_fault.persistent; /* after it: recover, or keep failing */
    }
    if (fail)
        errno = ENOMEM;
    return fail;
}

/* True if this system call (one of enum pcm_os_call) is to fail (errno
 * already set). */
static inline bool pcm_os_inject(unsigned call)
{
    if (__builtin_expect(pcm_os_fault.calls == 0, 1))
        return false;
    return pcm_os_inject_slow(call);
}

/* ---- address space ---- */

size_t pcm_os_page_size(void)
{
    /* From the auxiliary vector, as sysconf would: usable before libc's
     * constructors, and no page of libc's code that small programs never
     * touch (os_linux_vdso.c: why that counts). */
    unsigned long page = getauxval(AT_PAGESZ);
    return page ? (size_t)page : 4096;
}

static void *map_anonymous(size_t bytes, int extra_flags)
{
    if (bytes == 0 || pcm_os_inject(PCM_OS_CALL_MMAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (p == MAP_FAILED) {
        /* mmap may say EINVAL for an absurd length: malloc reports ENOMEM. */
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

void *pcm_os_map(size_t bytes)
{
    return map_anonymous(bytes, 0);
}

void *pcm_os_map_sparse(size_t bytes)
{
    return map_anonymous(bytes, MAP_NORESERVE);
}

void *pcm_os_map_at(void *at, size_t bytes)
{
    if (pcm_os_inject(PCM_OS_CALL_MMAP))
        return NULL;
    void *p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (p == at)
        return p;
    munmap(p, bytes);
    return NULL;
}

void *pcm_os_map_aligned(size_t bytes, size_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    size_t page = pcm_os_page_size();
    if (alignment <= page)
        return pcm_os_map(bytes);
    if (bytes == 0 || bytes > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    bytes = (bytes + page - 1) & ~(page - 1);
    /* Any mapping of bytes + alignment - page holds an aligned run of
     * `bytes`: mmap returns a page-aligned start, so at most
     * alignment - page bytes precede the first aligned address. */
    size_t slack = alignment - page;
    if (bytes > SIZE_MAX - slack) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = pcm_os_map(bytes + slack);
    if (!raw)
        return NULL;
    char *aligned = (char *)(((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1));
    size_t head = (size_t)(aligned - raw);
    size_t tail = slack - head;
    /* If a trim fails (only when the process hits vm.max_map_count), the
     * pages stay mapped and unused: address space lost, nothing broken. */
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(aligned + bytes, tail);
    return aligned;
}

/*
 * Pages are dropped, unmapped and moved at most PCM_OS_PIECE_BYTES to a
 * system call, cut at multiples of it (os.h).  Why: a call that zaps or
 * moves about 4 MiB or more of resident pages made all of the process's
 * pages slow on their next touch in the sandboxed VMs we are measured on
 * (PVM, shadow page tables): about 20,000 cycles each, with no page fault
 * the kernel counts (our reading: the hypervisor drops its shadow of the
 * process's page tables and rebuilds it page by page).  Measured with
 * tests of our own: after one madvise(MADV_DONTNEED), munmap or mremap
 * move of 8 MiB, all 2048 pages of another 8 MiB mapping were slow; after
 * the same 8 MiB in 2 MiB calls, 0 to 4 were.  In mixed sizes (one
 * thread) a single 4 MiB move cost some 5,500 such touches.  On bare metal
 * the pieces cost a system call per 2 MiB, against the kernel's work on
 * 512 pages each.
 */
static uintptr_t piece_end(uintptr_t at, uintptr_t end)
{
    uintptr_t next = (at & ~(uintptr_t)(PCM_OS_PIECE_BYTES - 1)) + PCM_OS_PIECE_BYTES;
    return next < end && next > at ? next : end;
}

void pcm_os_unmap(void *p, size_t bytes)
{
    if (!p || !bytes)
        return;
    for (uintptr_t at = (uintptr_t)p, end = at + bytes, to; at < end; at = to) {
        to = piece_end(at, end);
        munmap((void *)at, to - at);
    }
}

bool pcm_os_unmap_whole(void *p, size_t bytes)
{
    return munmap(p, bytes) == 0;
}

bool pcm_os_decommit(void *p, size_t bytes)
{
    for (uintptr_t at = (uintptr_t)p, end = at + bytes, to; at < end; at = to) {
        to = piece_end(at, end);
        if (pcm_os_inject(PCM_OS_CALL_MADVISE))
            return false;
        /* MADV_DONTNEED, not MADV_FREE: on a private anonymous mapping it
         * drops the pages at once and the range reads as zeros, which
         * callers rely on; MADV_FREE leaves old contents readable until
         * reclaim and keeps them counted in RSS.  (A refusal part way
         * leaves the pieces before it dropped: callers treat the whole
         * range as still committed, which only overstates it.) */
        if (madvise((void *)at, to - at, MADV_DONTNEED) != 0)
            return false;
    }
    return true;
}

void pcm_os_no_huge_pages(void *p, size_t bytes)
{
    int saved_errno = errno; /* EINVAL where THP is not built in */
    madvise(p, bytes, MADV_NOHUGEPAGE);
    errno = saved_errno;
}

bool pcm_os_hugepage(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    return madvise(p, bytes, MADV_HUGEPAGE) == 0;
#else
    (void)p;
    (void)bytes;
    return false;
#endif
}

/* mremap with `flags`; NULL + ENOMEM (the old mapping untouched) when the
 * kernel refuses. */
static void *pcm_os_mremap(void *p, size_t old_bytes, size_t new_bytes, int flags, void *target)
{
    if (new_bytes == 0 || pcm_os_inject(PCM_OS_CALL_MREMAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *q = mremap(p, old_bytes, new_bytes, flags, target);
    if (q == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return q;
}

/* Without MAYMOVE: grows only if the pages above are free, so the mapping
 * keeps its address (and its alignment). */
bool pcm_os_guard(void *p, size_t bytes)
{
    return mprotect(p, bytes, PROT_NONE) == 0;
}

bool pcm_os_random(void *buf, size_t len)
{
    int saved = errno;
    bool ok = getrandom(buf, len, GRND_NONBLOCK) == (ssize_t)len;
    errno = saved;
    return ok;
}

void *pcm_os_remap_in_place(void *p, size_t old_bytes, size_t new_bytes)
{
    return pcm_os_mremap(p, old_bytes, new_bytes, 0, NULL);
}

/* MAYMOVE | FIXED: the kernel moves the pages onto `target`, replacing
 * whatever was mapped there (a reservation of ours) - no copy.  A piece
 * at a time (above), the last one grown to cover the rest of new_bytes.
 * Pieces are cut at multiples of PCM_OS_PIECE_BYTES of p's addresses; a
 * target as aligned as p then takes whole page tables. */
void *pcm_os_remap_fixed(void *p, size_t old_bytes, size_t new_bytes, void *target)
{
    char *from = p, *to = target;
    for (uintptr_t at = (uintptr_t)p, end = at + old_bytes, next; at < end; at = next) {
        next = piece_end(at, end);
        size_t offset = at - (uintptr_t)p, piece = next - at;
        size_t grown = next == end ? piece + (new_bytes - old_bytes) : piece;
        if (pcm_os_mremap(from + offset, piece, grown, MREMAP_MAYMOVE | MREMAP_FIXED, to + offset))
            continue;
        if (offset == 0)
            return NULL; /* nothing moved yet: both as they were */
        /* Refused part way (the process at vm.max_map_count): copy the
         * rest over the reservation instead, and make the grown part read
         * as zeros, as a move would have. */
        memcpy(to + offset, from + offset, old_bytes - offset);
        if (!pcm_os_decommit(to + old_bytes, new_bytes - old_bytes))
            memset(to + old_bytes, 0, new_bytes - old_bytes);
        pcm_os_unmap(from + offset, old_bytes - offset);
        break;
    }
    return target;
}

/* ---- CPUs ---- */

/* Largest CPU number accepted from a list; keeps the arithmetic far from
 * overflow (Linux's NR_CPUS tops out at 8192). */
#define PCM_OS_CPU_NUMBER_MAX (1u << 20)

unsigned pcm_os_parse_cpu_list(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    if (end > p && end[-1] == '\n')
        end--;
    if (p == end)
        return 0;
    unsigned highest = 0;
    for (;;) {
        /* One item: N or N-M. */
        unsigned range[2] = {0, 0};
        for (int i = 0; i < 2; i++) {
            if (p == end || *p < '0' || *p > '9')
                return 0;
            unsigned v = 0;
            for (; p < end && *p >= '0' && *p <= '9'; p++) {
                v = v * 10 + (unsigned)(*p - '0');
                if (v > PCM_OS_CPU_NUMBER_MAX)
                    return 0;
            }
            range[i] = v;
            if (i == 0) {
                range[1] = v;
                if (p == end || *p != '-')
                    break;
                p++;
            }
        }
        if (range[1] < range[0])
            return 0;
        if (range[1] + 1 > highest)
            highest = range[1] + 1;
        if (p == end)
            return highest;
        if (*p != ',')
            return 0;
        p++;
    }
}

/* Read up to cap bytes of a small file with raw system calls (no stdio:
 * it allocates).  Returns the byte count, or -1 if it could not be opened
 * or read.  Returns cap when the file may be longer than cap. */
static long pcm_os_read_file(const char *path, char *buf, size_t cap)
{
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    return (long)len;
}

unsigned pcm_os_possible_cpus(void)
{
    int saved_errno = errno;
    unsigned count = 0;
    char text[512];
    long len = pcm_os_read_file("/sys/devices/system/cpu/possible", text, sizeof text);
    if (len > 0 && (size_t)len < sizeof text) /* a full buffer may be cut: distrust it */
        count = pcm_os_parse_cpu_list(text, (size_t)len);
    errno = saved_errno;
    return count;
}

unsigned pcm_os_cpu_count(void)
{
    int saved_errno = errno;
    unsigned count = pcm_os_possible_cpus();

    if (count == 0) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) {
            for (unsigned cpu = CPU_SETSIZE; cpu > 0; cpu--) {
                if (CPU_ISSET(cpu - 1, &set)) {
                    count = cpu;
                    break;
                }
            }
        }
    }

    errno = saved_errno;
    return count ? count : 1;
}

/* ---- fencing another CPU's restartable sequences ---- */

/* linux/membarrier.h's values (the cross toolchains' kernel headers may
 * predate them; they are ABI). */
#define MEMBARRIER_PRIVATE_EXPEDITED_RSEQ (1 << 7)
#define MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_RSEQ (1 << 8)
#define MEMBARRIER_FLAG_CPU (1 << 0)

static long membarrier(int cmd, unsigned flags, int cpu)
{
#ifdef SYS_membarrier
    return syscall(SYS_membarrier, cmd, flags, cpu);
#else
    (void)cmd, (void)flags, (void)cpu;
    errno = ENOSYS;
    return -1;
#endif
}

bool pcm_os_rseq_fence(unsigned cpu)
{
    /* 0 unknown, 1 registered, -1 refused: a refusal is not asked again. */
    static volatile int registered;
    int saved = errno;
    long done = -1;
    if (registered == 0)
        registered = membarrier(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0 ? 1 : -1;
    if (registered > 0) {
        done = membarrier(MEMBARRIER_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_FLAG_CPU, (int)cpu);
        /* A child of fork may have to register again (EPERM). */
        if (done != 0 && errno == EPERM && membarrier(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0)
            done = membarrier(MEMBARRIER_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_FLAG_CPU, (int)cpu);
    }
    errno = saved;
    return done == 0;
}

int pcm_os_current_cpu(void)
{
    int cpu = sched_getcpu();
    return cpu >= 0 ? cpu : -1;
}

/* ---- environment ---- */

#define PCM_OS_ENV_BYTES 16384

/* The exec-time environment, NUL-separated entries, for when environ is
 * NULL.  Written once (see os.h: start-up only). */
static char pcm_os_env_text[PCM_OS_ENV_BYTES];
static size_t pcm_os_env_len;
static bool pcm_os_env_loaded;

static void pcm_os_env_load(void)
{
    long len = pcm_os_read_file("/proc/self/environ", pcm_os_env_text, sizeof pcm_os_env_text);
    size_t keep = len > 0 ? (size_t)len : 0;
    /* Keep only whole entries: cut back to just after the last NUL, so a
     * value cut at the buffer's end is dropped rather than read short
     * (PCMALLOC_CPUS=12 must not become PCMALLOC_CPUS=1). */
    if (keep == sizeof pcm_os_env_text || (keep && pcm_os_env_text[keep - 1] != '\0')) {
        while (keep && pcm_os_env_text[keep - 1] != '\0')
            keep--;
    }
    pcm_os_env_len = keep;
    pcm_os_env_loaded = true;
}

/* If entry is "name=value", the value, else NULL. */
static const char *pcm_os_env_match(const char *entry, const char *name)
{
    while (*name && *entry == *name) {
        entry++;
        name++;
    }
    return *name == '\0' && *entry == '=' ? entry + 1 : NULL;
}

const char *pcm_os_getenv(const char *name)
{
    if (!name || !*name)
        return NULL;
    char **env = environ;
    if (env) {
        for (; *env; env++) {
            const char *value = pcm_os_env_match(*env, name);
            if (value)
                return value;
        }
        return NULL;
    }

    if (!pcm_os_env_loaded) {
        int saved_errno = errno;
        pcm_os_env_load();
        errno = saved_errno;
    }
    for (size_t at = 0; at < pcm_os_env_len;) {
        const char *entry = pcm_os_env_text + at;
        const char *value = pcm_os_env_match(entry, name);
        if (value)
            return value;
        while (at < pcm_os_env_len && pcm_os_env_text[at] != '\0')
            at++;
        at++; /* past the NUL */
    }
    return NULL;
}

const char *pcm_os_env_entry(size_t index)
{
    char **env = environ;
    if (env) {
        for (size_t i = 0; i < index; i++)
            if (!env[i])
                return NULL;
        return env[index];
    }
    if (!pcm_os_env_loaded) {
        int saved_errno = errno;
        pcm_os_env_load();
        errno = saved_errno;
    }
    size_t at = 0;
    for (size_t i = 0; i < index && at < pcm_os_env_len; i++) {
        while (at < pcm_os_env_len && pcm_os_env_text[at] != '\0')
            at++;
        at++; /* past the NUL */
    }
    return at < pcm_os_env_len ? pcm_os_env_text + at : NULL;
}
