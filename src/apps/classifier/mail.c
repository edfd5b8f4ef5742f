#include "apps/classifier/mail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/text/html_text.h"
#include "apps/text/textbuf.h"
#include "apps/text/utf8_text.h"

static const char *const issue_names[ATTN_MAIL_ISSUE_COUNT] = {
    "unknown",
    "duplicated header",
    "duplicated parameter",
    "unencoded 8-bit header",
    "invalid content type",
    "invalid RFC 2047 header value",
    "malformed multipart",
    "truncated message",
    "malformed message",
    "invalid header name",
    "conflicting header",
    "conflicting parameter",
    "multipart without boundary",
    "invalid parameter",
    "invalid address list",
    "nesting overflow",
    "part without content",
    "part without headers or content",
};

const char *attn_mail_issue_name(int code) {
  return (code > 0 && code < ATTN_MAIL_ISSUE_COUNT) ? issue_names[code] : issue_names[0];
}

int attn_mail_issue_is_fatal(int code) {
  switch (code) {
  case ATTN_MAIL_MALFORMED_MULTIPART:
  case ATTN_MAIL_TRUNCATED_MESSAGE:
  case ATTN_MAIL_MALFORMED_MESSAGE:
  case ATTN_MAIL_INVALID_HEADER_NAME:
  case ATTN_MAIL_CONFLICTING_HEADER:
  case ATTN_MAIL_CONFLICTING_PARAMETER:
  case ATTN_MAIL_MULTIPART_WITHOUT_BOUNDARY:
  case ATTN_MAIL_NESTING_OVERFLOW:
  case ATTN_MAIL_PART_WITHOUT_CONTENT:
  case ATTN_MAIL_PART_WITHOUT_HEADERS_OR_CONTENT: return 1;
  default: return 0;
  }
}

void attn_mail_stats_add(attn_mail_stats *st, const attn_mail_info *info) {
  st->messages++;
  st->malformed += info->malformed != 0;
  st->unparsable += info->unparsable != 0;
  st->no_text += info->no_text != 0;
  for (int k = 1; k < ATTN_MAIL_ISSUE_COUNT; k++)
    if (info->issues & (1u << k)) st->issues[k]++;
}

attn_status attn_mail_file_to_text(const char *path, char **text, size_t *text_len,
                                   attn_mail_info *info) {
  return attn_mail_file_to_text_flags(path, 0, text, text_len, info);
}

attn_status attn_mail_to_text(const void *raw, size_t len, char **text, size_t *text_len,
                              attn_mail_info *info) {
  return attn_mail_to_text_flags(raw, len, 0, text, text_len, info);
}

attn_status attn_mail_file_to_text_flags(const char *path, unsigned flags, char **text,
                                         size_t *text_len, attn_mail_info *info) {
  if (!path || !text) return attn_set_error(ATTN_EINVAL, "mail: NULL path or text pointer");
  char *raw;
  size_t len;
  attn_status s = attn_mail_read_file(path, &raw, &len);
  if (s) return s;
  s = attn_mail_to_text_flags(raw, len, flags, text, text_len, info);
  free(raw);
  return s;
}

#ifndef ATTN_HAVE_GMIME

int attn_mail_available(void) { return 0; }

attn_status attn_mail_to_text_flags(const void *raw, size_t len, unsigned flags, char **text,
                                    size_t *text_len, attn_mail_info *info) {
  (void)flags;
  (void)raw;
  (void)len;
  (void)text;
  (void)text_len;
  (void)info;
  return attn_set_error(ATTN_EUNSUPPORTED,
                        "mail: attn was built without GMime; install libgmime-3.0-dev "
                        "(apt-get install libgmime-3.0-dev) and rebuild");
}

#else

#include <gmime/gmime.h>
#include <pthread.h>

#define MAX_DEPTH 32

static pthread_once_t gmime_once = PTHREAD_ONCE_INIT;
static void gmime_start(void) { g_mime_init(); }

int attn_mail_available(void) { return 1; }

typedef struct {
  attn_textbuf *body;
  attn_mail_info *info;
  int oom;
} walk_ctx;

static void on_issue(gint64 offset, GMimeParserWarning code, const gchar *item, gpointer user) {
  (void)offset;
  (void)item;
  attn_mail_info *info = user;
  if ((int)code > 0 && (int)code < ATTN_MAIL_ISSUE_COUNT) {
    info->issues |= 1u << (int)code;
    if (attn_mail_issue_is_fatal((int)code)) info->malformed = 1;
  }
}

/* Separates the pieces of the body by one blank line. */
static void body_break(walk_ctx *c) {
  if (c->body->len && !c->oom && attn_textbuf_puts(c->body, "\n\n")) c->oom = 1;
}

static void add_text_part(walk_ctx *c, GMimeTextPart *part, int html) {
  char *t = g_mime_text_part_get_text(part); /* decoded, converted to UTF-8 */
  if (!t) return;
  size_t n = strlen(t);
  if (n == 0) {
    g_free(t);
    return;
  }
  body_break(c);
  if (html) {
    attn_textbuf tmp = {0};
    if (attn_utf8_sanitize(&tmp, t, n) || attn_html_to_text(c->body, tmp.data ? tmp.data : "", tmp.len))
      c->oom = 1;
    attn_textbuf_free(&tmp);
  } else if (attn_utf8_sanitize(c->body, t, n)) {
    c->oom = 1;
  }
  g_free(t);
  c->info->text_parts++;
}

static void add_attachment(walk_ctx *c, GMimeObject *obj) {
  GMimeContentType *ct = g_mime_object_get_content_type(obj);
  const char *name = GMIME_IS_PART(obj) ? g_mime_part_get_filename(GMIME_PART(obj)) : NULL;
  char line[256];
  snprintf(line, sizeof line, "[attachment %s/%s%s%s]",
           ct && g_mime_content_type_get_media_type(ct) ? g_mime_content_type_get_media_type(ct) : "application",
           ct && g_mime_content_type_get_media_subtype(ct) ? g_mime_content_type_get_media_subtype(ct) : "octet-stream",
           name ? " " : "", name ? name : "");
  body_break(c);
  if (attn_utf8_sanitize(c->body, line, strlen(line))) c->oom = 1;
  c->info->attachments++;
}

static void walk(walk_ctx *c, GMimeObject *obj, int depth) {
  if (!obj || c->oom) return;
  if (depth > MAX_DEPTH) {
    c->info->issues |= 1u << ATTN_MAIL_NESTING_OVERFLOW;
    c->info->malformed = 1;
    return;
  }
  if (GMIME_IS_MESSAGE_PART(obj)) {
    GMimeMessage *m = g_mime_message_part_get_message(GMIME_MESSAGE_PART(obj));
    if (m) walk(c, g_mime_message_get_mime_part(m), depth + 1);
    return;
  }
  if (GMIME_IS_MULTIPART(obj)) {
    GMimeMultipart *mp = GMIME_MULTIPART(obj);
    int n = g_mime_multipart_get_count(mp);
    GMimeContentType *ct = g_mime_object_get_content_type(obj);
    if (n == 0) { /* no parts found (e.g. no boundary): best effort, its raw body */
      const char *pro = g_mime_multipart_get_prologue(mp);
      if (pro && *pro) {
        body_break(c);
        if (attn_utf8_sanitize(c->body, pro, strlen(pro))) c->oom = 1;
        c->info->text_parts++;
      }
      return;
    }
    if (ct && g_mime_content_type_is_type(ct, "multipart", "alternative")) {
      int plain = -1, html = -1;
      for (int i = 0; i < n; i++) {
        GMimeContentType *sub = g_mime_object_get_content_type(g_mime_multipart_get_part(mp, i));
        if (!sub) continue;
        if (plain < 0 && g_mime_content_type_is_type(sub, "text", "plain")) plain = i;
        if (html < 0 && g_mime_content_type_is_type(sub, "text", "html")) html = i;
      }
      /* plain text first; else HTML; else the last (richest) alternative */
      int pick = plain >= 0 ? plain : html >= 0 ? html : n - 1;
      walk(c, g_mime_multipart_get_part(mp, pick), depth + 1);
      return;
    }
    for (int i = 0; i < n; i++) walk(c, g_mime_multipart_get_part(mp, i), depth + 1);
    return;
  }
  if (GMIME_IS_TEXT_PART(obj)) {
    GMimeContentDisposition *d = g_mime_object_get_content_disposition(obj);
    GMimeContentType *ct = g_mime_object_get_content_type(obj);
    int attachment = d && g_mime_content_disposition_is_attachment(d);
    if (!attachment) {
      add_text_part(c, GMIME_TEXT_PART(obj), ct && g_mime_content_type_is_type(ct, "text", "html"));
      return;
    }
  }
  add_attachment(c, obj);
}

/* Appends "Key: value\n" with the value on one line, valid UTF-8. */
static int put_header(attn_textbuf *out, const char *key, const char *value) {
  if (attn_textbuf_puts(out, key) || attn_textbuf_puts(out, ": ")) return -1;
  size_t start = out->len;
  if (value && attn_utf8_sanitize(out, value, strlen(value))) return -1;
  for (size_t i = start; i < out->len; i++)
    if (out->data[i] == '\n' || out->data[i] == '\t') out->data[i] = ' ';
  return attn_textbuf_putc(out, '\n');
}

/* The sender-controlled headers a spam filter reads besides Subject and From,
 * each as it appears (RFC 2047 words decoded), cut to ATTN_MAIL_HEADER_MAX
 * bytes; absent ones are left out. Never the trace (Received) or a filter's
 * own (X-Spam-*) headers: those describe the path, not the message. */
static int put_more_headers(attn_textbuf *out, GMimeMessage *msg) {
  GMimeObject *mobj = GMIME_OBJECT(msg);
  static const char *const names[] = {"To",         "Cc",         "Reply-To",     "Date",
                                      "Message-ID", "X-Mailer",   "User-Agent",   "Content-Type"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = g_mime_object_get_header(mobj, names[i]);
    char *owned = NULL;
    if (!strcmp(names[i], "Content-Type")) { /* kept by GMime on the top part: type and charset */
      GMimeObject *part = g_mime_message_get_mime_part(msg);
      GMimeContentType *ct = part && g_mime_object_get_header(part, "Content-Type")
                                 ? g_mime_object_get_content_type(part) : NULL; /* written, not GMime's default */
      char *mt = ct ? g_mime_content_type_get_mime_type(ct) : NULL;
      const char *cs = ct ? g_mime_content_type_get_parameter(ct, "charset") : NULL;
      if (mt) owned = cs ? g_strdup_printf("%s; charset=%s", mt, cs) : g_strdup(mt);
      g_free(mt);
      v = owned;
    }
    if (!v) continue;
    char cut[ATTN_MAIL_HEADER_MAX + 1];
    size_t n = strlen(v);
    if (n > ATTN_MAIL_HEADER_MAX) {
      n = ATTN_MAIL_HEADER_MAX;
      while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80) n--; /* whole UTF-8 characters */
    }
    memcpy(cut, v, n);
    cut[n] = 0;
    g_free(owned);
    if (put_header(out, names[i], cut)) return -1;
  }
  return 0;
}

attn_status attn_mail_to_text_flags(const void *raw, size_t len, unsigned flags, char **text,
                                    size_t *text_len, attn_mail_info *info) {
  if (!raw || !text) return attn_set_error(ATTN_EINVAL, "mail: NULL message or text pointer");
  *text = NULL;
  if (text_len) *text_len = 0;
  if (len > ATTN_MAIL_MAX_BYTES)
    return attn_set_error(ATTN_EINVAL, "mail: a message of %zu bytes is larger than %u MiB, the "
                          "limit on one message", len, (unsigned)(ATTN_MAIL_MAX_BYTES >> 20));
  attn_mail_info local;
  if (!info) info = &local;
  memset(info, 0, sizeof *info);
  pthread_once(&gmime_once, gmime_start);

  const char *bytes = raw;
  if (len >= 5 && !memcmp(bytes, "From ", 5)) { /* mbox separator line */
    const char *nl = memchr(bytes, '\n', len);
    size_t skip = nl ? (size_t)(nl - bytes) + 1 : len;
    bytes += skip;
    len -= skip;
  }

  attn_textbuf out = {0};
  int oom = 0;
  GMimeStream *stream = g_mime_stream_mem_new_with_buffer(bytes, len);
  GMimeParser *parser = g_mime_parser_new_with_stream(stream);
  GMimeParserOptions *opts = g_mime_parser_options_new();
  const char *fallback[] = {"UTF-8", "windows-1252", NULL};
  g_mime_parser_options_set_fallback_charsets(opts, fallback);
  g_mime_parser_options_set_warning_callback(opts, on_issue, info);
  GMimeMessage *msg = g_mime_parser_construct_message(parser, opts);

  if (!msg) {
    info->unparsable = info->malformed = 1;
    if (attn_utf8_sanitize(&out, bytes, len)) oom = 1;
  } else {
    GMimeObject *mobj = GMIME_OBJECT(msg);
    const char *subject = g_mime_message_get_subject(msg);
    InternetAddressList *from = g_mime_message_get_from(msg);
    char *from_s = (from && internet_address_list_length(from) > 0)
                       ? internet_address_list_to_string(from, NULL, FALSE)
                       : NULL;
    const char *from_v = from_s ? from_s : g_mime_object_get_header(mobj, "From");
    if (put_header(&out, "Subject", subject) || put_header(&out, "From", from_v) ||
        ((flags & ATTN_MAIL_MORE_HEADERS) && put_more_headers(&out, msg)) ||
        attn_textbuf_putc(&out, '\n'))
      oom = 1;
    g_free(from_s);
    attn_textbuf body = {0};
    walk_ctx c = {&body, info, 0};
    walk(&c, g_mime_message_get_mime_part(msg), 0);
    if (c.oom || attn_textbuf_put(&out, body.data ? body.data : "", body.len)) oom = 1;
    attn_textbuf_free(&body);
    if (info->text_parts == 0) info->no_text = 1;
    g_object_unref(msg);
  }
  g_mime_parser_options_free(opts);
  g_object_unref(parser);
  g_object_unref(stream);
  if (oom) {
    attn_textbuf_free(&out);
    return attn_set_error(ATTN_ENOMEM, "mail: out of memory building the message text");
  }
  *text = attn_textbuf_take(&out, text_len);
  if (!*text) return attn_set_error(ATTN_ENOMEM, "mail: out of memory");
  return ATTN_OK;
}

#endif
