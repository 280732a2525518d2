/*
 * remote.c - pushing onto another heap's remote-free stack (remote.h).
 * Lock-free; the only lock here is an optional try to help drain.
 */
#include "remote.h"

#include "free_mark.h"
#include "hardening.h"

/* The depth the object pushed onto `seen` would have.  A racy hint:
 * `seen` may already be drained and reused (its word 1 rewritten by the
 * drain or by its new owner while we read it); the value only decides
 * whether to help drain.  Its own function so that ThreadSanitizer's
 * suppression of this one deliberate race (tests/sanitize/tsan.supp) can
 * name it and nothing else. */
static inline pcm_word_t remote_depth_hint(pcm_word_t seen)
{
    pcm_word_t depth = seen ? (pcm_load_relaxed((volatile pcm_word_t *)seen + 1) & PCM_DEPTH_MASK) + 1 : 1;
    return depth > PCM_DEPTH_MASK ? PCM_DEPTH_MASK : depth;
}

void pcm_remote_free(struct pcm_heap *owner, void *obj)
{
    pcm_word_t seen = pcm_load_relaxed(&owner->remote);
    pcm_word_t depth;
    do {
        depth = remote_depth_hint(seen);
        *(pcm_word_t *)obj = pcm_link_encode(obj, seen);
        pcm_free_mark_set(obj, depth);
        /* release: the object's words are written before it can be drained */
    } while (!pcm_cas_release(&owner->remote, &seen, (pcm_word_t)obj));

    if (depth >= PCM_REMOTE_HELP_DEPTH && pcm_heap_trylock(owner)) {
        pcm_heap_drain_remote_locked(owner);
        pcm_heap_unlock(owner);
    }
}
