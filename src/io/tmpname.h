/* Temporary names for atomic writes (internal): a file is written to
 * PATH.tmp.<pid> and renamed over PATH when complete. */
#ifndef ATTN_IO_TMPNAME_H
#define ATTN_IO_TMPNAME_H

/* PATH.tmp.<this pid> (malloc'd; NULL when out of memory), after removing the
 * PATH.tmp.<pid> files of processes that no longer run: a write killed
 * half-way leaves its temporary file, and the next write to the same PATH
 * cleans it up. Files of live processes (a concurrent writer) are kept. */
char *attn_tmp_name(const char *path);

#endif
