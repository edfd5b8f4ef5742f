/* Temporary input/output files for the fuzz targets (fuzz_file.h). */
#include "fuzz_file.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[4096], in_path[4200], out_path[4200];

static void remove_dir(void) {
  unlink(in_path);
  unlink(out_path);
  rmdir(dir);
}

static void make_dir(void) {
  if (dir[0]) return;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/attn-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  snprintf(in_path, sizeof in_path, "%s/input", dir);
  snprintf(out_path, sizeof out_path, "%s/output", dir);
  atexit(remove_dir);
}

const char *fuzz_file_input(const uint8_t *data, size_t size) {
  make_dir();
  FILE *f = fopen(in_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    perror(in_path);
    abort();
  }
  return in_path;
}

const char *fuzz_file_output(void) {
  make_dir();
  return out_path;
}

void fuzz_file_check(const char *cmd, attn_status st) {
  if (st && !attn_last_error()[0]) {
    fprintf(stderr, "fuzz: %s failed (%s) without a message\n", cmd, attn_status_str(st));
    abort();
  }
  if (st && access(out_path, F_OK) == 0) {
    fprintf(stderr, "fuzz: %s failed but left %s\n", cmd, out_path);
    abort();
  }
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    abort();
  }
  for (struct dirent *e; (e = readdir(d));) {
    const char *n = e->d_name;
    if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "input") && strcmp(n, "output")) {
      fprintf(stderr, "fuzz: %s/%s left behind\n", dir, n);
      abort();
    }
  }
  closedir(d);
  unlink(out_path);
}

void fuzz_file_run(const char *cmd, fuzz_file_cmd run, const uint8_t *data, size_t size) {
  const char *in = fuzz_file_input(data, size);
  const attn_backend backends[2] = {ATTN_BACKEND_MATH, ATTN_BACKEND_AUTO};
  for (int b = 0; b < 2; b++) {
    attn_clear_error();
    fuzz_file_check(cmd, run(in, fuzz_file_output(), backends[b]));
  }
}
