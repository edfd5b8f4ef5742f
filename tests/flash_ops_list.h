/* The f32 flash kernel sets a test runs at this ISA level: the portable set,
 * then the level's own when it differs (tests/run.sh runs every level). */
#ifndef ATTN_TEST_FLASH_OPS_LIST_H
#define ATTN_TEST_FLASH_OPS_LIST_H

#include <stdio.h>

#include "attn.h"
#include "kernels/kern.h"

/* Fills list[0..1]; returns how many; prints the "# level ..." line. */
static inline int flash_ops_portable_and_level(const attn_flash_ops *list[2]) {
  int n = 0;
  list[n++] = attn_flash_ops_generic();
  if (attn_kern_get()->flash != list[0]) list[n++] = attn_kern_get()->flash;
  printf("# level %s; kernel sets: %s%s%s\n", attn_isa_name(attn_isa_active()), list[0]->name,
         n > 1 ? ", " : "", n > 1 ? list[1]->name : "");
  return n;
}

#endif
