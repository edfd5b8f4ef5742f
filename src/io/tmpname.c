/* PATH.tmp.<pid> names, and the clean-up of those that dead writers left. */
#include "io/tmpname.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pid of name = base ".tmp." digits, else 0. */
static long tmp_pid(const char *name, const char *base, size_t blen) {
  if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) return 0;
  const char *d = name + blen + 5;
  char *end;
  if (*d < '1' || *d > '9') return 0;
  errno = 0;
  long pid = strtol(d, &end, 10);
  return *end || errno ? 0 : pid;
}

static void remove_stale(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, blen = strlen(base);
  char *dir = malloc(dlen + 3); /* dlen 0: "./" and its NUL */
  if (!dir) return;
  if (dlen) memcpy(dir, path, dlen), dir[dlen] = '\0';
  else strcpy(dir, "./");
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    long pid = tmp_pid(e->d_name, base, blen);
    if (pid <= 0 || pid == (long)getpid() || (pid_t)pid != pid) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to know */
    size_t n = strlen(dir) + strlen(e->d_name) + 1;
    char *full = malloc(n);
    if (full) {
      snprintf(full, n, "%s%s", dir, e->d_name);
      unlink(full); /* best effort: a failure leaves it as before */
      free(full);
    }
  }
  if (d) closedir(d);
  free(dir);
}

char *attn_tmp_name(const char *path) {
  size_t n = strlen(path) + 32;
  char *tmp = malloc(n);
  if (!tmp) return NULL;
  remove_stale(path);
  snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
  return tmp;
}
