/* harness_internal.h - between the harness core and its platform files. */
#ifndef PCM_TEST_HARNESS_INTERNAL_H
#define PCM_TEST_HARNESS_INTERNAL_H

/* Failures recorded so far by the running test in this process; a forked
 * worker exits non-zero when its count rose, so the parent can see it. */
unsigned pcm_test_failures_now(void);

/* Count a failure reported by a worker the harness could not see. */
void pcm_test_fail_from_worker(unsigned count);

#endif
