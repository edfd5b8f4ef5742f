#include "attn/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

const char *attn_last_error(void) { return last_error; }

void attn_clear_error(void) { last_error[0] = '\0'; }

const char *attn_status_str(attn_status s) {
  switch (s) {
  case ATTN_OK: return "ok";
  case ATTN_EINVAL: return "invalid argument";
  case ATTN_ENOMEM: return "out of memory";
  case ATTN_EIO: return "I/O error";
  case ATTN_EFORMAT: return "bad file format";
  case ATTN_EUNSUPPORTED: return "unsupported";
  case ATTN_ENUMERIC: return "numeric error";
  }
  return "unknown status";
}

/* Formatted aside first: a caller may pass attn_last_error() itself as an
 * argument ("file: %s"), which vsnprintf into last_error would overwrite
 * while reading it. */
attn_status attn_set_error(attn_status s, const char *fmt, ...) {
  char msg[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(last_error, msg, sizeof msg);
  return s;
}

attn_status attn_prefix_error(attn_status s, const char *prefix) {
  return attn_set_error(s, "%s: %s", prefix ? prefix : "", last_error);
}
