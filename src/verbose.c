/*
 * verbose.c - what PCMALLOC_VERBOSE=1 prints at start-up, on stderr: the
 * version, the build, the fast path in use and why, the CPUs and heaps,
 * and every option in force (defaults included), so that a user can see
 * what a variable did or did not change.
 *
 * Runs once, inside the first malloc (init.c): never here malloc, stdio,
 * or anything but pcm_message.
 */
#include "verbose.h"

#include "atomic.h"
#include "cpu.h"
#include "fast_path.h"
#include "hardening.h"
#include "heap.h"
#include "init.h"
#include "message.h"
#include "os.h"
#include "pcmalloc.h"

void pcm_verbose_startup(void)
{
    char options[PCM_MESSAGE_MAX];
    pcm_options_format(&pcm_opts, options, sizeof options);
    pcm_message("pcmalloc %s, %s build (%s atomics)", PCMALLOC_VERSION, PCM_ARCH_NAME,
                pcm_arch_variant_name(pcm_arch_variant_current()));
    pcm_message("fast path: %s (%s)", pcm_fast_path_name(), pcm_fast_path_reason());
    pcm_message("%s", pcm_hardening_summary());
    pcm_message("%u possible CPUs, %u per-CPU heaps, CPU number from %s", pcm_os_cpu_count(), pcm_heap_count,
                pcm_cpu_source());
    pcm_message("options: %s", options);
}
