/*
 * cxx_mangling.h - the parts of C++'s operator names, as the Itanium C++
 * ABI mangles them, that pcmalloc's operators new (preload_cxx.c) and
 * delete (api.c) are exported under.
 */
#ifndef PCM_CXX_MANGLING_H
#define PCM_CXX_MANGLING_H

#include <stdint.h>

/* size_t: unsigned int on a 32-bit target, unsigned long on a 64-bit one. */
#if SIZE_MAX == 0xffffffffu
#define PCM_CXX_SIZE_T "j"
#else
#define PCM_CXX_SIZE_T "m"
#endif
#define PCM_CXX_NOTHROW "RKSt9nothrow_t" /* const std::nothrow_t & */
#define PCM_CXX_ALIGN "St11align_val_t"   /* std::align_val_t */

#endif
