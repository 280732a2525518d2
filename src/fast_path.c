/*
 * fast_path.c - choosing the fast path (fast_path.h).
 */
#include "fast_path.h"

enum pcm_fast_path pcm_fast_path;
static const char *reason = "not chosen yet";

void pcm_fast_path_choose(void)
{
    pcm_fast_path = PCM_FAST_PATH_CAS;
    reason = "restartable sequences are not built yet";
}

const char *pcm_fast_path_reason(void)
{
    return reason;
}
