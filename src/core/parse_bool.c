#include "core/parse_bool.h"

#include <stddef.h>
#include <strings.h>

int attn_parse_bool(const char *s, int *out) {
  static const char *const spell[2][4] = {{"false", "0", "no", "off"}, {"true", "1", "yes", "on"}};
  if (!s) return 0;
  for (int v = 0; v < 2; v++)
    for (size_t i = 0; i < 4; i++)
      if (!strcasecmp(s, spell[v][i])) {
        *out = v;
        return 1;
      }
  return 0;
}
