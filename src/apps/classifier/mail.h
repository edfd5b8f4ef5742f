/* Reading one raw e-mail into one text for classification, with GMime 3:
 *   "Subject: <decoded subject>\nFrom: <decoded from>\n\n<body text>"
 * The body is the text of the message's text parts in order: MIME multipart
 * walked (depth <= 32), quoted-printable and base64 decoded, charsets
 * converted to UTF-8 by GMime, HTML reduced to text (apps/html_text.h); of a
 * multipart/alternative only the text/plain part is used (else the HTML one).
 * Non-text parts and attachments appear as one line "[attachment TYPE NAME]".
 * Embedded message/rfc822 parts are walked too. The result is always valid
 * UTF-8 (apps/utf8_text.h). A leading mbox "From " line is skipped.
 *
 * Malformed input never fails: GMime recovers what it can and reports
 * issues through a callback; they are recorded in attn_mail_info. A message
 * GMime cannot read at all ("unparsable") yields its raw bytes as text; a
 * multipart in which no part was found (e.g. no boundary) yields its raw
 * body; a message without a text part yields the header lines only.
 *
 * Built without GMime (no ATTN_HAVE_GMIME), attn_mail_to_text returns
 * ATTN_EUNSUPPORTED naming the package to install. Single-threaded use
 * (GMime is initialised once, on first use). */
#ifndef ATTN_APPS_MAIL_H
#define ATTN_APPS_MAIL_H

#include <stddef.h>

#include "attn/status.h"

/* Parser issues, numbered as GMime's GMimeParserWarning. */
enum {
  ATTN_MAIL_DUPLICATED_HEADER = 1,
  ATTN_MAIL_DUPLICATED_PARAMETER,
  ATTN_MAIL_UNENCODED_8BIT_HEADER,
  ATTN_MAIL_INVALID_CONTENT_TYPE,
  ATTN_MAIL_INVALID_RFC2047_HEADER_VALUE,
  ATTN_MAIL_MALFORMED_MULTIPART,
  ATTN_MAIL_TRUNCATED_MESSAGE,
  ATTN_MAIL_MALFORMED_MESSAGE,
  ATTN_MAIL_INVALID_HEADER_NAME,
  ATTN_MAIL_CONFLICTING_HEADER,
  ATTN_MAIL_CONFLICTING_PARAMETER,
  ATTN_MAIL_MULTIPART_WITHOUT_BOUNDARY,
  ATTN_MAIL_INVALID_PARAMETER,
  ATTN_MAIL_INVALID_ADDRESS_LIST,
  ATTN_MAIL_NESTING_OVERFLOW,
  ATTN_MAIL_PART_WITHOUT_CONTENT,
  ATTN_MAIL_PART_WITHOUT_HEADERS_OR_CONTENT,
  ATTN_MAIL_ISSUE_COUNT /* codes are 1..ATTN_MAIL_ISSUE_COUNT-1 */
};

typedef struct {
  int malformed;      /* an issue that can lose content (see attn_mail_issue_is_fatal) or unparsable */
  int unparsable;     /* GMime built no message: the text is the raw bytes */
  int no_text;        /* no text part: the text is the header lines only */
  int text_parts;     /* text parts used */
  int attachments;    /* non-text parts / attachments listed */
  unsigned issues;    /* bit k set: issue code k was reported */
} attn_mail_info;

/* Totals over many messages. */
typedef struct {
  long messages, malformed, unparsable, no_text;
  long issues[ATTN_MAIL_ISSUE_COUNT]; /* messages that reported code k */
} attn_mail_stats;

/* 1 if this build reads mail (GMime linked). */
int attn_mail_available(void);

/* The largest message read: GMime takes 10 to 100 times a message's size in
 * memory while parsing it (a 50 MB message stopped the program inside GLib
 * under a 200 MB limit), so longer ones are refused (ATTN_EINVAL) before
 * parsing. Real mail is far smaller; attachments beyond it carry no text. */
#define ATTN_MAIL_MAX_BYTES ((size_t)8 << 20)

/* Text of the raw message raw[0..len). *text (NUL-terminated, *text_len
 * bytes, free()) on success; info may be NULL. Fails only for NULL
 * arguments, memory, a message over ATTN_MAIL_MAX_BYTES, or a build without
 * GMime. */
attn_status attn_mail_to_text(const void *raw, size_t len, char **text, size_t *text_len,
                              attn_mail_info *info);

/* The bytes of one message (*raw malloc'd, NUL-terminated) from file path or
 * descriptor fd (name: for messages), read to its end: ATTN_EIO for a
 * directory or a read error and ATTN_EINVAL past ATTN_MAIL_MAX_BYTES, each
 * as "NAME: reason" (strerror). */
attn_status attn_mail_read_file(const char *path, char **raw, size_t *len);
attn_status attn_mail_read_fd(int fd, const char *name, char **raw, size_t *len);

/* Reads file path and calls attn_mail_to_text (ATTN_EIO naming the path). */
attn_status attn_mail_file_to_text(const char *path, char **text, size_t *text_len,
                                   attn_mail_info *info);

/* Flags of the _flags variants (0 = the texts above).
 * ATTN_MAIL_MORE_HEADERS: after Subject and From, the other headers the
 * sender writes, one line each where present, in this order: To, Cc,
 * Reply-To, Date, Message-ID, X-Mailer, User-Agent, Content-Type (each cut
 * to ATTN_MAIL_HEADER_MAX bytes). Trace (Received) and filter (X-Spam-*)
 * headers are never included. */
#define ATTN_MAIL_MORE_HEADERS 1u
#define ATTN_MAIL_HEADER_MAX 200
attn_status attn_mail_to_text_flags(const void *raw, size_t len, unsigned flags, char **text,
                                    size_t *text_len, attn_mail_info *info);
attn_status attn_mail_file_to_text_flags(const char *path, unsigned flags, char **text,
                                         size_t *text_len, attn_mail_info *info);

/* 1 for the issues that can lose content: malformed multipart, truncated or
 * malformed message, part without content, and every GMIME_CRIT_* one. */
int attn_mail_issue_is_fatal(int code);
/* "malformed multipart", ...; "unknown" outside 1..ATTN_MAIL_ISSUE_COUNT-1. */
const char *attn_mail_issue_name(int code);

void attn_mail_stats_add(attn_mail_stats *st, const attn_mail_info *info);

#endif
