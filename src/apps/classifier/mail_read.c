/* Reading one raw message from a file or descriptor, bounded by
 * ATTN_MAIL_MAX_BYTES: read until end of file (so /proc files, which report
 * size 0, and pipes are read whole), never more than the cap (so /dev/zero
 * ends), and never a directory. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/mail.h"
#include "apps/text/textbuf.h"

attn_status attn_mail_read_fd(int fd, const char *name, char **raw, size_t *len) {
  if (!name || !raw || !len) return attn_set_error(ATTN_EINVAL, "mail: NULL argument");
  *raw = NULL;
  *len = 0;
  struct stat sb;
  if (fstat(fd, &sb) != 0) return attn_set_error(ATTN_EIO, "%s: %s", name, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return attn_set_error(ATTN_EIO, "%s: %s", name, strerror(EISDIR));
  attn_textbuf b = {0};
  char chunk[65536];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      attn_textbuf_free(&b);
      return attn_set_error(ATTN_EIO, "%s: %s", name, strerror(e));
    }
    if (got == 0) break;
    if (b.len + (size_t)got > ATTN_MAIL_MAX_BYTES) {
      attn_textbuf_free(&b);
      return attn_set_error(ATTN_EINVAL, "%s: larger than %u MiB, the limit on one message", name,
                            (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
    }
    if (attn_textbuf_put(&b, chunk, (size_t)got)) {
      attn_textbuf_free(&b);
      return attn_set_error(ATTN_ENOMEM, "%s: out of memory reading the message", name);
    }
  }
  *raw = attn_textbuf_take(&b, len);
  if (!*raw) return attn_set_error(ATTN_ENOMEM, "%s: out of memory reading the message", name);
  return ATTN_OK;
}

attn_status attn_mail_read_file(const char *path, char **raw, size_t *len) {
  if (!path || !raw || !len) return attn_set_error(ATTN_EINVAL, "mail: NULL argument");
  *raw = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return attn_set_error(ATTN_EIO, "%s: %s", path, strerror(errno));
  attn_status st = attn_mail_read_fd(fd, path, raw, len);
  close(fd);
  return st;
}
