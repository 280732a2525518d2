/*
 * verbose.h - the start-up report of PCMALLOC_VERBOSE=1 (verbose.c).
 */
#ifndef PCM_VERBOSE_H
#define PCM_VERBOSE_H

/* Print it (call once, at the end of start-up, when everything it names
 * has been chosen). */
void pcm_verbose_startup(void);

#endif
