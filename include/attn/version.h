/* attn — the library's version: the one place it is written. The Makefile
 * reads ATTN_VERSION_MAJOR/MINOR/PATCH from here for libattn.so's file name
 * (libattn.so.MAJOR.MINOR.PATCH) and SONAME (libattn.so.MAJOR; in the 0.x
 * series, where a minor release may break the ABI, libattn.so.0.MINOR), and attn.pc's
 * Version. The macros give the version a program was compiled against; the
 * functions give the version of the library it runs with. */
#ifndef ATTN_VERSION_H
#define ATTN_VERSION_H

#include "attn/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 2
#define ATTN_VERSION_PATCH 0

/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 200 for 0.2.0 */
#define ATTN_VERSION_NUMBER \
  (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)

#define ATTN_VERSION_STR_(x) #x
#define ATTN_VERSION_STR(x) ATTN_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH", e.g. "0.2.0" */
#define ATTN_VERSION                                                                      \
  ATTN_VERSION_STR(ATTN_VERSION_MAJOR) "." ATTN_VERSION_STR(ATTN_VERSION_MINOR) "." \
      ATTN_VERSION_STR(ATTN_VERSION_PATCH)

/* ATTN_VERSION_NUMBER of the library linked at run time. */
ATTN_API int attn_version(void);
/* ATTN_VERSION of the library linked at run time (static storage). */
ATTN_API const char *attn_version_string(void);

#ifdef __cplusplus
}
#endif
#endif
