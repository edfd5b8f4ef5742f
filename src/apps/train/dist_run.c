/* apps/train/dist_run.h */
#include "apps/train/dist_run.h"

#include <stdio.h>

int attn_dist_run_open(attn_dist **d, int shards, const char *cmd) {
  if (attn_dist_open(d, shards)) {
    fprintf(stderr, "attn %s: %s\n", cmd, attn_last_error());
    return 1;
  }
  if (attn_dist_rank(*d) > 0 && !freopen("/dev/null", "w", stdout)) {
    fprintf(stderr, "attn %s: rank %d: cannot silence stdout\n", cmd, attn_dist_rank(*d));
    return attn_dist_run_close(*d, 1, cmd);
  }
  return 0;
}

int attn_dist_run_close(attn_dist *d, int rc, const char *cmd) {
  if (rc != 0 && attn_dist_size(d) > 1) {
    fprintf(stderr, "attn %s: rank %d of %d failed (above): ending every rank\n", cmd,
            attn_dist_rank(d), attn_dist_size(d));
    fflush(stderr);
    attn_dist_abort(d, rc);
  }
  attn_dist_close(d);
  return rc;
}
