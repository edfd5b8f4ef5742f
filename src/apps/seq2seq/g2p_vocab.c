/* G2P vocabularies (g2p_vocab.h). */
#include "apps/seq2seq/g2p_vocab.h"

#include <string.h>

static const char *const consonants[24] = {"B",  "CH", "D", "DH", "F", "G",  "HH", "JH",
                                           "K",  "L",  "M", "N",  "NG", "P", "R",  "S",
                                           "SH", "T",  "TH", "V", "W",  "Y", "Z",  "ZH"};
static const char *const vowels[15] = {"AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER",
                                       "EY", "IH", "IY", "OW", "OY", "UH", "UW"};
static const char *const specials[ATTN_G2P_SPECIAL] = {"<pad>", "<unk>", "<s>", "</s>"};
static const char *const vowel_names[45] = {"AA0", "AA1", "AA2", "AE0", "AE1", "AE2", "AH0", "AH1", "AH2", "AO0", "AO1", "AO2", "AW0", "AW1", "AW2", "AY0", "AY1", "AY2", "EH0", "EH1", "EH2", "ER0", "ER1", "ER2", "EY0", "EY1", "EY2", "IH0", "IH1", "IH2", "IY0", "IY1", "IY2", "OW0", "OW1", "OW2", "OY0", "OY1", "OY2", "UH0", "UH1", "UH2", "UW0", "UW1", "UW2"};

#define NPHONE (ATTN_G2P_SPECIAL + 24 + 15 * 3)

#define NPHONE_FREE (ATTN_G2P_SPECIAL + 24 + 15)

int attn_g2p_phone_count(void) { return NPHONE; }
int attn_g2p_phone_count_for(int stress) { return stress ? NPHONE : NPHONE_FREE; }

const char *attn_g2p_phone_name_for(int id, int stress) {
  if (stress) return attn_g2p_phone_name(id);
  if (id < 0 || id >= NPHONE_FREE) return "?";
  if (id < ATTN_G2P_SPECIAL + 24) return attn_g2p_phone_name(id);
  return vowels[id - ATTN_G2P_SPECIAL - 24];
}

int attn_g2p_phone_strip(int id) {
  const int v = id - ATTN_G2P_SPECIAL - 24;
  if (v < 0 || id >= NPHONE) return id;
  return ATTN_G2P_SPECIAL + 24 + v / 3;
}

int attn_g2p_phone_restore(int id) {
  const int v = id - ATTN_G2P_SPECIAL - 24;
  if (v < 0 || id >= NPHONE_FREE) return id;
  return ATTN_G2P_SPECIAL + 24 + 3 * v + 1;
}

const char *attn_g2p_phone_name(int id) {
  if (id < 0 || id >= NPHONE) return "?";
  if (id < ATTN_G2P_SPECIAL) return specials[id];
  id -= ATTN_G2P_SPECIAL;
  if (id < 24) return consonants[id];
  id -= 24;
  return vowel_names[id];
}

static int find(const char *const *tab, int n, const char *sym, int len) {
  for (int i = 0; i < n; i++)
    if ((int)strlen(tab[i]) == len && !memcmp(tab[i], sym, (size_t)len)) return i;
  return -1;
}

int attn_g2p_is_vowel(const char *sym, int len) { return find(vowels, 15, sym, len) >= 0; }

int attn_g2p_phone_id(const char *sym, int len) {
  int c = find(consonants, 24, sym, len);
  if (c >= 0) return ATTN_G2P_SPECIAL + c;
  if (len < 3 || sym[len - 1] < '0' || sym[len - 1] > '2') return -1;
  int v = find(vowels, 15, sym, len - 1);
  if (v < 0) return -1;
  return ATTN_G2P_SPECIAL + 24 + 3 * v + (sym[len - 1] - '0');
}

int attn_g2p_phone_unstressed(int id) {
  int v = id - ATTN_G2P_SPECIAL - 24;
  if (v < 0 || id >= NPHONE) return id;
  return ATTN_G2P_SPECIAL + 24 + 3 * (v / 3) + 1;
}

attn_status attn_g2p_phones_encode(const char *pron, int32_t *ids, int max, int *n) {
  int k = 0;
  const char *s = pron;
  while (*s) {
    while (*s == ' ') s++;
    if (!*s) break;
    const char *e = s;
    while (*e && *e != ' ') e++;
    int id = attn_g2p_phone_id(s, (int)(e - s));
    if (id < 0) return attn_set_error(ATTN_EINVAL, "'%.*s' is not an ARPAbet phoneme", (int)(e - s), s);
    if (k >= max) return attn_set_error(ATTN_EINVAL, "pronunciation longer than %d phonemes", max);
    ids[k++] = id;
    s = e;
  }
  *n = k;
  return ATTN_OK;
}

void attn_g2p_graphemes_make(attn_g2p_graphemes *g, const char *chars, int len) {
  unsigned char seen[256] = {0};
  for (int i = 0; i < len; i++) seen[(unsigned char)chars[i]] = 1;
  memset(g, 0, sizeof *g);
  for (int c = 1; c < 256; c++) {
    g->id[c] = ATTN_G2P_UNK;
    if (seen[c]) {
      g->id[c] = (int16_t)(ATTN_G2P_SPECIAL + g->n);
      g->chars[g->n++] = (char)c;
    }
  }
  g->id[0] = ATTN_G2P_UNK;
}

int attn_g2p_graphemes_encode(const attn_g2p_graphemes *g, const char *word, int len,
                              int32_t *ids) {
  int unknown = 0;
  for (int i = 0; i < len; i++) {
    unsigned char c = (unsigned char)word[i];
    if (c >= 'a' && c <= 'z') c = (unsigned char)(c - 'a' + 'A');
    ids[i] = g->id[c];
    unknown += ids[i] == ATTN_G2P_UNK;
  }
  return unknown;
}
