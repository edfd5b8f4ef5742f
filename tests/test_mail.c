/* Mail reading (GMime), HTML to text, UTF-8 repair: tests/data/mail/ holds
 * small tricky messages written for these tests. */
#include "harness.h"

#include "apps/text/html_text.h"
#include "apps/classifier/mail.h"
#include "apps/text/utf8_text.h"

static int valid_utf8(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    int l = attn_utf8_seq_len((const unsigned char *)s + i, n - i);
    if (l == 0) return 0;
    i += (size_t)l;
  }
  return 1;
}

static int has(const char *text, const char *needle) { return text && strstr(text, needle) != NULL; }

/* Text of tests/data/mail/<name>, or NULL (and the case skipped) without GMime. */
static char *read_mail(const char *name, attn_mail_info *info) {
  char path[256];
  snprintf(path, sizeof path, "tests/data/mail/%s", name);
  char *text = NULL;
  size_t len = 0;
  if (!attn_mail_available()) {
    CHECK_ERR(attn_mail_file_to_text(path, &text, &len, info), ATTN_EUNSUPPORTED);
    CHECK(strstr(attn_last_error(), "libgmime-3.0-dev") != NULL);
    SKIP("built without GMime");
    return NULL;
  }
  CHECK_OK(attn_mail_file_to_text(path, &text, &len, info));
  if (text) {
    CHECK(strlen(text) == len);
    CHECK(valid_utf8(text, len));
  }
  return text;
}

static void test_multipart_alternative_quoted_printable(void) {
  attn_mail_info info;
  char *t = read_mail("alt_qp.eml", &info);
  if (!t) return;
  const char *head = "Subject: Lunch caf\xc3\xa9 today\nFrom: Alice Example <alice@example.com>\n\n";
  CHECK(!strncmp(t, head, strlen(head)));
  CHECK(has(t, "at the caf\xc3\xa9 at noon"));
  CHECK(has(t, "that it is wrapped with a soft line break.")); /* soft break joined */
  CHECK(has(t, "Price: 5=5"));                                   /* =3D decoded */
  CHECK(!has(t, "HTMLVERSION"));                                 /* only one alternative */
  CHECK(info.text_parts == 1 && !info.malformed && !info.no_text);
  free(t);
}

static void test_base64_text_and_encoded_headers(void) {
  attn_mail_info info;
  char *t = read_mail("base64_text.eml", &info);
  if (!t) return;
  CHECK(has(t, "Subject: \xc3\x9c" "berweisung\n"));
  CHECK(has(t, "From: J\xc3\xbcrgen <j@example.de>\n"));
  CHECK(has(t, "Gr\xc3\xbc\xc3\x9f" "e aus K\xc3\xb6ln \xe2\x80\x93 base64 works.\nSecond line \xe2\x82\xac."));
  free(t);
}

static void test_iso_8859_1_body_and_8bit_header(void) {
  attn_mail_info info;
  char *t = read_mail("latin1.eml", &info);
  if (!t) return;
  CHECK(has(t, "Voil\xc3\xa0 le r\xc3\xa9sum\xc3\xa9, tr\xc3\xa8s bien. \xc2\xa3" "100 \xc2\xb0" "C"));
  CHECK(has(t, "From: Andr\xc3\xa9 <andre@example.fr>"));
  CHECK(has(t, "Subject: R\xc3\xa9sum\xc3\xa9 8-bit header")); /* raw 8-bit header read as 1252 */
  CHECK(info.issues & (1u << ATTN_MAIL_UNENCODED_8BIT_HEADER));
  CHECK(!info.malformed); /* a warning, not content loss */
  free(t);
}

static void test_windows_1252_and_undeclared_charset(void) {
  char *t = read_mail("cp1252.eml", NULL);
  if (!t) return;
  CHECK(has(t, "\xe2\x80\x9cSmart quotes\xe2\x80\x9d cost \xe2\x82\xac" "100 \xe2\x80\x93 now\xe2\x80\xa6"));
  free(t);
  t = read_mail("nocharset_8bit.eml", NULL);
  if (!t) return;
  CHECK(has(t, "Caf\xc3\xa9 with no charset and \xe2\x80\x9cquotes\xe2\x80\x9d."));
  free(t);
}

static void test_html_only_message(void) {
  attn_mail_info info;
  char *t = read_mail("html_only.eml", &info);
  if (!t) return;
  CHECK(has(t, "From: Deals <deals@spam.example>"));
  CHECK(has(t, "You have won!"));
  CHECK(has(t, "Fish & chips for \xc2\xa3" "5 \xe2\x80\x94 caf\xc3\xa9 \xe2\x82\xac" "10 ABC"));
  CHECK(has(t, "cell1 cell2"));
  CHECK(has(t, "http://win.example/claim?id=1&x=2 HERE now\nBYE &unknown; & <tag>"));
  CHECK(!has(t, "SCRIPTCODE") && !has(t, "color: red") && !has(t, "HIDDENCOMMENT"));
  CHECK(!has(t, "<p>") && !has(t, "&nbsp;"));
  CHECK(info.text_parts == 1);
  free(t);
}

static void test_nested_multipart_with_attachment(void) {
  attn_mail_info info;
  char *t = read_mail("nested_attach.eml", &info);
  if (!t) return;
  CHECK(has(t, "Please find the report attached.\n\n[attachment application/pdf report.pdf]"));
  CHECK(!has(t, "HTMLDUPLICATE"));
  CHECK(!has(t, "BINARYPDF") && !has(t, "JVBERi")); /* neither decoded nor raw base64 */
  CHECK(has(t, "Forwarded body text.")); /* message/rfc822 walked */
  CHECK(info.text_parts == 2 && info.attachments == 1 && !info.malformed);
  free(t);
}

static void test_broken_messages_are_counted_not_fatal(void) {
  attn_mail_info info;
  char *t = read_mail("broken_boundary.eml", &info);
  if (!t) return;
  CHECK(has(t, "First part survives.") && has(t, "Second part never closed"));
  CHECK(info.malformed && (info.issues & (1u << ATTN_MAIL_TRUNCATED_MESSAGE)));
  free(t);
  t = read_mail("no_boundary.eml", &info);
  CHECK(has(t, "Text inside a multipart without boundary.")); /* best effort: raw body */
  CHECK(info.malformed && (info.issues & (1u << ATTN_MAIL_MULTIPART_WITHOUT_BOUNDARY)));
  free(t);
  t = read_mail("truncated_headers.eml", &info);
  CHECK(has(t, "Subject: cut off in the hea\nFrom: trunc@example.com\n"));
  CHECK(info.malformed && info.no_text);
  free(t);
  attn_mail_stats st = {0};
  attn_mail_info a = {.malformed = 1, .issues = 1u << ATTN_MAIL_TRUNCATED_MESSAGE}, b = {.no_text = 1};
  attn_mail_stats_add(&st, &a);
  attn_mail_stats_add(&st, &b);
  CHECK(st.messages == 2 && st.malformed == 1 && st.no_text == 1 && st.issues[ATTN_MAIL_TRUNCATED_MESSAGE] == 1);
  CHECK(!strcmp(attn_mail_issue_name(ATTN_MAIL_TRUNCATED_MESSAGE), "truncated message"));
}

static void test_no_text_part_gives_headers_and_mbox_line_skipped(void) {
  attn_mail_info info;
  char *t = read_mail("image_only.eml", &info);
  if (!t) return;
  CHECK(!strcmp(t, "Subject: picture\nFrom: img@example.com\n\n[attachment image/gif a.gif]"));
  CHECK(info.no_text && !info.malformed);
  free(t);
  t = read_mail("mbox_from_line.eml", &info);
  CHECK(t && !strcmp(t, "Subject: mbox style\nFrom: someone@example.com\n\nBody after an mbox From_ line.\n"));
  free(t);
}

/* Every prefix and many corrupted copies of the tricky messages: never a
 * failure, always valid UTF-8 (ASan/UBSan watch the rest). */
static void test_garbage_never_fails(void) {
  if (!attn_mail_available()) return;
  const char *names[] = {"nested_attach.eml", "html_only.eml", "alt_qp.eml"};
  unsigned s = 12345;
  for (int f = 0; f < 3; f++) {
    char path[128];
    snprintf(path, sizeof path, "tests/data/mail/%s", names[f]);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    int bad = 0;
    for (size_t cut = 0; cut <= n; cut += 13) {
      char copy[8192];
      memcpy(copy, buf, cut);
      for (int k = 0; k < 4 && cut; k++) { /* flip a few bytes */
        s = s * 1664525u + 1013904223u;
        copy[(s >> 8) % cut] = (char)(s >> 24);
      }
      char *t = NULL;
      size_t len;
      attn_mail_info info;
      if (attn_mail_to_text(copy, cut, &t, &len, &info) != ATTN_OK || !valid_utf8(t, len)) bad++;
      free(t);
    }
    CHECK(bad == 0);
  }
  char *t;
  CHECK_ERR(attn_mail_to_text(NULL, 0, &t, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_mail_file_to_text("tests/data/mail/does-not-exist", &t, NULL, NULL), ATTN_EIO);
}

/* ATTN_MAIL_MORE_HEADERS: the sender's headers in a fixed order after
 * Subject and From, decoded and cut; never the trace or filter headers. */
static void test_more_headers(void) {
  if (!attn_mail_available()) return;
  char *t = NULL, *basic = NULL;
  size_t len = 0;
  attn_mail_info info;
  CHECK_OK(attn_mail_file_to_text("tests/data/mail/many_headers.eml", &basic, &len, &info));
  CHECK(basic && !strcmp(basic, "Subject: Cheap offer\nFrom: Deals <promo@deals.example>\n\nBuy now.\n"));
  CHECK_OK(attn_mail_file_to_text_flags("tests/data/mail/many_headers.eml", ATTN_MAIL_MORE_HEADERS, &t,
                                        &len, &info));
  if (t) {
    CHECK(strlen(t) == len && valid_utf8(t, len));
    const char *want = "Subject: Cheap offer\nFrom: Deals <promo@deals.example>\n"
                       "To: undisclosed-recipients:;\n"
                       "Reply-To: R\xc3\xa9ponse <reply@deals.example>\n"
                       "Date: Mon, 1 Jul 2002 10:00:00 +0000\n"
                       "Message-ID: <abc.123@deals.example>\n"
                       "X-Mailer: MassMailer 9000 x";
    CHECK(!strncmp(t, want, strlen(want)));
    const char *xm = strstr(t, "X-Mailer: ");
    const char *nl = xm ? strchr(xm, '\n') : NULL;
    CHECK(xm && nl && nl - (xm + 10) == ATTN_MAIL_HEADER_MAX); /* cut to 200 bytes */
    CHECK(has(t, "\nContent-Type: text/plain; charset=iso-8859-1\n\nBuy now.\n"));
    CHECK(!has(t, "Received") && !has(t, "X-Spam") && !has(t, "192.0.2.7") && !has(t, "Return-Path"));
  }
  free(t);
  free(basic);
  /* the same flags on raw bytes; a message with no extra headers is unchanged */
  const char *raw = "From: a@example.com\nSubject: hi\n\nbody\n";
  CHECK_OK(attn_mail_to_text_flags(raw, strlen(raw), ATTN_MAIL_MORE_HEADERS, &t, &len, NULL));
  CHECK(t && !strcmp(t, "Subject: hi\nFrom: a@example.com\n\nbody\n"));
  free(t);
}

static char *html(const char *s) {
  attn_textbuf b = {0};
  CHECK(attn_html_to_text(&b, s, strlen(s)) == 0);
  return attn_textbuf_take(&b, NULL);
}

static void test_html_to_text_units(void) {
  struct {
    const char *in, *want;
  } cases[] = {
      {"a<b>b</b>c", "abc"},                                   /* inline tags join */
      {"one<br>two<p>three</p>four", "one\ntwo\nthree\nfour"}, /* block tags break */
      {"  lots \n\t of   space  ", "lots of space"},
      {"x<script>if (a<b) { s = '</p>'; }</script>y", "x y"},
      {"<STYLE>p{}</STYLE>z", "z"},
      {"a<!-- c <b> -->b", "ab"},
      {"&lt;&gt;&amp;&quot;&#39;&#x263A;&#9731;", "<>&\"'\xe2\x98\xba\xe2\x98\x83"},
      {"&#150;&#128;", "\xe2\x80\x93\xe2\x82\xac"}, /* 0x80..0x9F read as Windows-1252 */
      {"&#0;&#xD800;&#99999999;", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"AT&T & co &amp", "AT&T & co &"},
      {"a < b > c", "a < b > c"},
      {"<a href='http://x.y/?q=1&amp;r=2'>go</a>", "http://x.y/?q=1&r=2 go"},
      {"<a href=\"#top\">up</a><a href=\"javascript:x()\">js</a>", "upjs"},
      {"<img alt=\"a>b\" src=x>after", "after"}, /* '>' inside a quoted attribute */
      {"unterminated <tag", "unterminated"},
      {"<script>never closed", ""},
      {"caf\xc3\xa9&nbsp;cr\xc3\xa8me", "caf\xc3\xa9 cr\xc3\xa8me"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = html(cases[i].in);
    if (!got || strcmp(got, cases[i].want)) {
      printf("  html case %zu: got \"%s\", want \"%s\"\n", i, got ? got : "(null)", cases[i].want);
      h_case_failed = 1;
    }
    free(got);
  }
}

static void test_utf8_sanitize(void) {
  attn_textbuf b = {0};
  /* valid UTF-8 kept; lone 0xE9 and 0x80 read as 1252; CR and NUL dropped */
  const char in[] = "ok \xc3\xa9 \xe9 \x80 \xed\xa0\x80 \xf0\x9f\x98\x80\r\n\0x";
  CHECK(attn_utf8_sanitize(&b, in, sizeof in - 1) == 0);
  const char want[] = "ok \xc3\xa9 \xc3\xa9 \xe2\x82\xac \xc3\xad\xc2\xa0\xe2\x82\xac \xf0\x9f\x98\x80\nx";
  CHECK(b.len == sizeof want - 1 && !memcmp(b.data, want, b.len));
  attn_textbuf_free(&b);
  CHECK(attn_utf8_seq_len((const unsigned char *)"\xc0\x80", 2) == 0); /* overlong */
  CHECK(attn_utf8_seq_len((const unsigned char *)"\xf4\x90\x80\x80", 4) == 0); /* > U+10FFFF */
  CHECK(attn_utf8_seq_len((const unsigned char *)"\xe2\x82", 2) == 0); /* truncated */
}

/* A message over ATTN_MAIL_MAX_BYTES is refused before GMime sees it (GMime
 * takes 10-100x a message's size: 50 MB under a 200 MB limit stopped the
 * program inside GLib); at the limit it is read. From memory and from files:
 * a file is read to its end but never past the limit (/dev/zero), and a
 * directory is an error naming it, not a huge allocation. */
static void test_size_limit(void) {
  if (!attn_mail_available()) {
    SKIP("built without GMime");
    return;
  }
  const size_t cap = ATTN_MAIL_MAX_BYTES;
  char *raw = malloc(cap + 1), *text = NULL;
  size_t len = 0;
  const char head[] = "Subject: big\n\n";
  memcpy(raw, head, sizeof head - 1);
  memset(raw + sizeof head - 1, 'x', cap + 1 - (sizeof head - 1));
  CHECK_ERR(attn_mail_to_text(raw, cap + 1, &text, &len, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "8 MiB") != NULL && !text);
  for (size_t i = 64; i < cap; i += 64) raw[i] = '\n'; /* short lines: quick to parse */
  CHECK_OK(attn_mail_to_text(raw, cap, &text, &len, NULL));
  CHECK(text && len > cap / 2);
  free(text);
  free(raw);
  char *bytes = NULL;
  CHECK_ERR(attn_mail_read_file("/dev/zero", &bytes, &len), ATTN_EINVAL);
  CHECK(!bytes && strstr(attn_last_error(), "/dev/zero: larger than 8 MiB") != NULL);
  CHECK_ERR(attn_mail_read_file("tests", &bytes, &len), ATTN_EIO);
  CHECK(!bytes && strcmp(attn_last_error(), "tests: Is a directory") == 0);
  CHECK_ERR(attn_mail_file_to_text("tests/data", &text, &len, NULL), ATTN_EIO);
  CHECK_OK(attn_mail_read_file("/proc/self/status", &bytes, &len)); /* stat says 0 bytes */
  CHECK(bytes && len > 0 && strlen(bytes) == len);
  free(bytes);
}

int main(void) {
  RUN(test_size_limit);
  RUN(test_multipart_alternative_quoted_printable);
  RUN(test_base64_text_and_encoded_headers);
  RUN(test_iso_8859_1_body_and_8bit_header);
  RUN(test_windows_1252_and_undeclared_charset);
  RUN(test_html_only_message);
  RUN(test_nested_multipart_with_attachment);
  RUN(test_broken_messages_are_counted_not_fatal);
  RUN(test_no_text_part_gives_headers_and_mbox_line_skipped);
  RUN(test_garbage_never_fails);
  RUN(test_more_headers);
  RUN(test_html_to_text_units);
  RUN(test_utf8_sanitize);
  HARNESS_END();
}
