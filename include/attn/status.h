/* attn — status codes and the last-error message.
 * Every public function returns an attn_status; on failure it also sets a
 * thread-local message readable with attn_last_error(). Library code never
 * exits or aborts on user data. */
#ifndef ATTN_STATUS_H
#define ATTN_STATUS_H

#include "attn/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ATTN_OK = 0,
  ATTN_EINVAL = 1,       /* invalid argument: shape, dtype, name, value */
  ATTN_ENOMEM = 2,       /* out of memory */
  ATTN_EIO = 3,          /* read/write/rename failed */
  ATTN_EFORMAT = 4,      /* bad file format */
  ATTN_EUNSUPPORTED = 5, /* valid request this build/CPU cannot do */
  ATTN_ENUMERIC = 6      /* NaN/Inf where finite numbers are required */
} attn_status;

/* Message of the last error set on this thread ("" if none). */
ATTN_API const char *attn_last_error(void);
/* Short fixed name of a status code, e.g. "invalid argument". */
ATTN_API const char *attn_status_str(attn_status s);
/* Clear this thread's last error message. */
ATTN_API void attn_clear_error(void);
/* Set this thread's message and return s (printf-style). For library code and
 * applications built on it. */
ATTN_API attn_status attn_set_error(attn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Re-set this thread's message as "prefix: message" (e.g. the file a nested
 * call was about) and return s. */
ATTN_API attn_status attn_prefix_error(attn_status s, const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
