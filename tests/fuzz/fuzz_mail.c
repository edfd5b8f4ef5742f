/* libFuzzer target: the mail reader (apps/mail.h, GMime) on a fuzzed raw
 * message, with the plain and the more-headers text. Malformed mail never
 * fails; the text must be valid UTF-8 of the length reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/mail.h"
#include "io/json.h"

static void read_mail(const uint8_t *data, size_t size, unsigned flags) {
  char *text = NULL;
  size_t len = 0;
  attn_mail_info info;
  attn_status st = attn_mail_to_text_flags(data, size, flags, &text, &len, &info);
  if (st == ATTN_OK && (strlen(text) > len || !attn_json_utf8_valid(text, len))) {
    fprintf(stderr, "fuzz: mail text is not %zu bytes of valid UTF-8\n", len);
    abort();
  }
  if (st != ATTN_OK && st != ATTN_ENOMEM) {
    fprintf(stderr, "fuzz: mail failed: %s\n", attn_last_error());
    abort();
  }
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_mail(data, size, 0);
  read_mail(data, size, ATTN_MAIL_MORE_HEADERS);
  return 0;
}
