/* A labelled mail corpus on disk, its split, and its texts.
 *
 * Layout: DIR/<group>/<message file>. Every sub-folder of DIR not starting
 * with '.' is a group; every regular file in it not starting with '.' (and
 * not named "cmds", the index file in the original SpamAssassin tarballs)
 * is one raw message. Label: 1 (spam) if the group name contains "spam"
 * (any case), else 0 (ham). Groups and files are sorted by name (strcmp),
 * so the order and everything derived from it is deterministic.
 *
 * Split: stratified by group (hence by label): within each group, in group
 * order, the files are shuffled with a splitmix64 stream seeded by `seed`
 * (Fisher-Yates), then the first round(n*train%) go to train, the next
 * round(n*val%) to validation, the rest to test. The split file lists one
 * "train|val|test<TAB>group/file" line per message ('#' lines are comments),
 * so a run can be repeated on exactly the same split.
 *
 * Typical use (see src/cli/cli_data.c):
 *   attn_corpus *c; attn_corpus_scan(dir, &c);
 *   attn_corpus_split(c, seed, 80, 10);      or attn_corpus_load_split(c, file)
 *   attn_corpus_load_texts(c);                c->text[i], c->label[i], c->split[i]
 *   attn_corpus_free(c); */
#ifndef ATTN_APPS_DATASET_H
#define ATTN_APPS_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "apps/classifier/mail.h"
#include "attn/status.h"

enum { ATTN_SPLIT_TRAIN = 0, ATTN_SPLIT_VAL = 1, ATTN_SPLIT_TEST = 2, ATTN_SPLIT_COUNT = 3 };

typedef struct {
  char *dir;
  int n;              /* messages */
  char **paths;       /* [n] "group/file", relative to dir */
  int *group;         /* [n] index into group_names */
  int *label;         /* [n] 1 spam, 0 ham */
  int *split;         /* [n] ATTN_SPLIT_*, or -1 before a split is made or loaded */
  int n_groups;
  char **group_names; /* [n_groups] */
  int *group_label;   /* [n_groups] */
  char **text;        /* [n] after attn_corpus_load_texts (NUL-terminated UTF-8) */
  size_t *text_len;   /* [n] */
  attn_mail_info *info; /* [n] per-message parse report, after load_texts */
  attn_mail_stats mail; /* totals, after load_texts */
  unsigned mail_flags;  /* ATTN_MAIL_* flags load_texts reads mail with (0 after scan) */
} attn_corpus;

/* "train", "val", "test" (NULL otherwise). */
const char *attn_split_name(int split);

/* Lists the messages of dir. ATTN_EIO if dir cannot be read, ATTN_EFORMAT
 * if it holds no group folder or no message. */
attn_status attn_corpus_scan(const char *dir, attn_corpus **out);
/* Deterministic stratified split; train_pct + val_pct <= 100, both >= 0. */
attn_status attn_corpus_split(attn_corpus *c, uint64_t seed, int train_pct, int val_pct);
/* Writes the split file atomically (path.tmp.<pid>, then rename). `note` is
 * written as a '#' comment line (may be NULL). */
attn_status attn_corpus_save_split(const attn_corpus *c, const char *path, const char *note);
/* Reads a split file; it must assign every message of c exactly once and
 * name no other (ATTN_EFORMAT naming the path otherwise). */
attn_status attn_corpus_load_split(attn_corpus *c, const char *path);
/* Reads and parses every message (apps/mail.h); malformed ones are counted
 * in c->mail, never fatal. Fails on I/O errors, memory, or no GMime. */
attn_status attn_corpus_load_texts(attn_corpus *c);
/* Messages with the given split and label (-1: any). */
int attn_corpus_count(const attn_corpus *c, int split, int label);
void attn_corpus_free(attn_corpus *c);

#endif
