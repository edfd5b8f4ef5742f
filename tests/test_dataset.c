/* Corpus folder scanning, labels, the stratified split and its file, and
 * reading the texts (a throw-away corpus built under /tmp). */
#define _XOPEN_SOURCE 700
#include "harness.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/dataset.h"

static char root[64];

static void put_file(const char *rel, const char *content) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(content, f);
  fclose(f);
}

/* groups: easy_ham (20), hard-ham (10), spam-1 (10), SPAM_two (5) + noise */
static void make_corpus(void) {
  snprintf(root, sizeof root, "/tmp/attn_test_dataset_XXXXXX");
  CHECK(mkdtemp(root) != NULL);
  const char *groups[] = {"easy_ham", "hard-ham", "spam-1", "SPAM_two", ".hidden"};
  const int counts[] = {20, 10, 10, 5, 3};
  for (int g = 0; g < 5; g++) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, groups[g]);
    CHECK(mkdir(p, 0755) == 0);
    for (int i = counts[g] - 1; i >= 0; i--) { /* created in reverse: the scan must sort */
      char rel[128], body[256];
      snprintf(rel, sizeof rel, "%s/msg%03d.txt", groups[g], i);
      snprintf(body, sizeof body, "From: a%d@example.com\nSubject: %s number %d\n\n%s body %d\n", i,
               groups[g], i, strstr(groups[g], "am_") || strstr(groups[g], "ham") ? "meeting notes" : "cheap pills", i);
      put_file(rel, body);
    }
  }
  put_file("spam-1/cmds", "index file of the original tarballs\n");
  put_file("spam-1/.DS_Store", "junk\n");
  put_file("README", "a file at the top level is not a group\n");
}

static int rm_entry(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  return remove(p);
}

static void remove_corpus(void) {
  if (root[0]) nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_scan_lists_groups_files_and_labels(void) {
  attn_corpus *c = NULL;
  CHECK_OK(attn_corpus_scan(root, &c));
  if (!c) return;
  CHECK(c->n == 45 && c->n_groups == 4);
  /* strcmp order: "SPAM_two" < "easy_ham" < "hard-ham" < "spam-1" */
  CHECK(!strcmp(c->group_names[0], "SPAM_two") && !strcmp(c->group_names[3], "spam-1"));
  CHECK(c->group_label[0] == 1 && c->group_label[1] == 0 && c->group_label[2] == 0 && c->group_label[3] == 1);
  CHECK(!strcmp(c->paths[0], "SPAM_two/msg000.txt") && !strcmp(c->paths[4], "SPAM_two/msg004.txt"));
  CHECK(!strcmp(c->paths[5], "easy_ham/msg000.txt") && !strcmp(c->paths[44], "spam-1/msg009.txt"));
  int spam = 0;
  for (int i = 0; i < c->n; i++) {
    spam += c->label[i];
    CHECK(c->label[i] == c->group_label[c->group[i]]);
    CHECK(c->split[i] == -1);
    CHECK(!strstr(c->paths[i], "cmds") && !strstr(c->paths[i], ".DS_Store") && !strstr(c->paths[i], ".hidden"));
  }
  CHECK(spam == 15);
  attn_corpus_free(c);
}

static void test_split_is_stratified_and_deterministic(void) {
  attn_corpus *a = NULL, *b = NULL;
  CHECK_OK(attn_corpus_scan(root, &a));
  CHECK_OK(attn_corpus_scan(root, &b));
  if (!a || !b) return;
  CHECK_OK(attn_corpus_split(a, 42, 80, 10));
  CHECK_OK(attn_corpus_split(b, 42, 80, 10));
  CHECK(!memcmp(a->split, b->split, (size_t)a->n * sizeof *a->split));
  /* per group: easy_ham 20 -> 16/2/2, hard-ham 10 -> 8/1/1, spam-1 10 -> 8/1/1, SPAM_two 5 -> 4/1/0 (4.0, 0.5 -> 1) */
  int want[4][3] = {{4, 1, 0}, {16, 2, 2}, {8, 1, 1}, {8, 1, 1}};
  for (int g = 0; g < 4; g++) {
    int got[3] = {0, 0, 0};
    for (int i = 0; i < a->n; i++)
      if (a->group[i] == g) got[a->split[i]]++;
    CHECK(got[0] == want[g][0] && got[1] == want[g][1] && got[2] == want[g][2]);
  }
  CHECK(attn_corpus_count(a, ATTN_SPLIT_TRAIN, 1) == 12 && attn_corpus_count(a, -1, -1) == 45);
  CHECK_OK(attn_corpus_split(b, 43, 80, 10));
  CHECK(memcmp(a->split, b->split, (size_t)a->n * sizeof *a->split) != 0); /* another seed, another split */
  CHECK_ERR(attn_corpus_split(a, 1, 95, 10), ATTN_EINVAL);
  CHECK_ERR(attn_corpus_split(a, 1, -1, 10), ATTN_EINVAL);
  attn_corpus_free(a);
  attn_corpus_free(b);
}

static void test_split_file_round_trip_and_mismatch(void) {
  attn_corpus *a = NULL, *b = NULL;
  CHECK_OK(attn_corpus_scan(root, &a));
  CHECK_OK(attn_corpus_scan(root, &b));
  if (!a || !b) return;
  char path[128], bad[128];
  snprintf(path, sizeof path, "%s/split.tsv", root);
  snprintf(bad, sizeof bad, "%s/bad.tsv", root);
  CHECK_ERR(attn_corpus_save_split(a, path, NULL), ATTN_EINVAL); /* no split yet */
  CHECK_OK(attn_corpus_split(a, 7, 60, 20));
  CHECK_OK(attn_corpus_save_split(a, path, "seed 7"));
  CHECK_OK(attn_corpus_load_split(b, path));
  CHECK(!memcmp(a->split, b->split, (size_t)a->n * sizeof *a->split));
  FILE *f = fopen(path, "r");
  char line[256];
  CHECK(f && fgets(line, sizeof line, f) && !strcmp(line, "# seed 7\n"));
  CHECK(f && fgets(line, sizeof line, f) && strstr(line, "\tSPAM_two/msg000.txt\n"));
  if (f) fclose(f);
  /* a file that misses one message, names an unknown one, repeats one, or is garbled */
  const char *cases[] = {"train\tspam-1/msg000.txt\n", "train\tnope/x.txt\n",
                         "train\tspam-1/msg000.txt\ntest\tspam-1/msg000.txt\n", "holdout\tspam-1/msg000.txt\n"};
  for (int k = 0; k < 4; k++) {
    f = fopen(bad, "w");
    if (!f) continue;
    fputs(cases[k], f);
    fclose(f);
    CHECK_ERR(attn_corpus_load_split(b, bad), ATTN_EFORMAT);
  }
  CHECK(!memcmp(a->split, b->split, (size_t)a->n * sizeof *a->split)); /* untouched on failure */
  CHECK_ERR(attn_corpus_load_split(b, "/nonexistent/split.tsv"), ATTN_EIO);
  remove(bad);
  remove(path);
  attn_corpus_free(a);
  attn_corpus_free(b);
}

static void test_load_texts(void) {
  attn_corpus *c = NULL;
  CHECK_OK(attn_corpus_scan(root, &c));
  if (!c) return;
  if (!attn_mail_available()) {
    CHECK_ERR(attn_corpus_load_texts(c), ATTN_EUNSUPPORTED);
    attn_corpus_free(c);
    return;
  }
  CHECK_OK(attn_corpus_load_texts(c));
  CHECK(c->text && c->mail.messages == 45 && c->mail.malformed == 0);
  CHECK(c->text && !strcmp(c->text[0], "Subject: SPAM_two number 0\nFrom: a0@example.com\n\ncheap pills body 0\n"));
  CHECK(c->text && strstr(c->text[5], "meeting notes body 0"));
  attn_corpus_free(c);
}

static void test_bad_folders(void) {
  attn_corpus *c = NULL;
  CHECK_ERR(attn_corpus_scan("/nonexistent/corpus", &c), ATTN_EIO);
  char empty[128];
  snprintf(empty, sizeof empty, "%s/easy_ham", root); /* files only, no group folder */
  CHECK_ERR(attn_corpus_scan(empty, &c), ATTN_EFORMAT);
  snprintf(empty, sizeof empty, "%s/.hidden/sub", root);
  CHECK(mkdir(empty, 0755) == 0);
  snprintf(empty, sizeof empty, "%s/.hidden", root); /* one group, no message */
  CHECK_ERR(attn_corpus_scan(empty, &c), ATTN_EFORMAT);
  CHECK(c == NULL);
  CHECK_ERR(attn_corpus_scan(NULL, &c), ATTN_EINVAL);
}

int main(void) {
  make_corpus();
  RUN(test_scan_lists_groups_files_and_labels);
  RUN(test_split_is_stratified_and_deterministic);
  RUN(test_split_file_round_trip_and_mismatch);
  RUN(test_load_texts);
  RUN(test_bad_folders);
  remove_corpus();
  HARNESS_END();
}
