/* Output paths of commands that save or draw one file per input (attn
 * predict --picture / --save-attention, attn g2p predict --save-attention):
 * checked before any work, and named after each input. */
#ifndef ATTN_CLI_OUTPATH_H
#define ATTN_CLI_OUTPATH_H

#include <stddef.h>

/* DIR exists (made if missing, with its parents) and is writable: 0, or 1
 * after saying "attn CMD: OPT DIR: why" on stderr. */
int cli_out_dir_ready(const char *opt, const char *dir);
/* The folder the file OUT goes into is writable and OUT names a file: 0, or
 * 1 after saying why not. */
int cli_out_file_ready(const char *opt, const char *out);

/* Distinct stems for output names, one per input. */
typedef struct {
  char **stems; /* [cap] (calloc'd by the caller) the stems given so far */
  int n;
} cli_stems;
/* name's stem: with strip, its base name without the extension ("-":
 * "stdin"); bytes other than [A-Za-z0-9._-] as '_', at most 100, "message"
 * for an empty one, made unique among the stems given before with "-2",
 * "-3"... (owned by s; NULL: out of memory). */
const char *cli_stem(cli_stems *s, const char *name, int strip);
void cli_stems_free(cli_stems *s);

/* The file for one input: out itself (many = 0), else out with "_<stem>"
 * before its ".safetensors" (out_<stem>.safetensors). 1 when it does not fit. */
int cli_out_name(char *buf, size_t n, const char *out, int many, const char *stem);

#endif
