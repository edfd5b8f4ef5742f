/* For fuzz targets whose code under test reads a path and writes one: the
 * input goes to DIR/input in a private temporary directory (made on first
 * use under $TMPDIR or /tmp, removed at exit), the output goes to
 * DIR/output. fuzz_file_check then holds the command to its contract: no
 * output file after a failure, nothing else (no PATH.tmp.<pid> leftover)
 * after any input; a breach aborts, which libFuzzer records as a finding. */
#ifndef ATTN_FUZZ_FILE_H
#define ATTN_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

/* Path of DIR/input holding data[0..size). An I/O error of this machine
 * aborts (it is no finding of the code under test, but no input may pass
 * untested). */
const char *fuzz_file_input(const uint8_t *data, size_t size);
/* Path of DIR/output (not created). */
const char *fuzz_file_output(void);
/* After the code under test returned st: a failure must carry a message;
 * then checks the directory as above and removes the output for the next
 * input. cmd names the command in the abort message. */
void fuzz_file_check(const char *cmd, attn_status st);

/* The whole target for a command IN -> OUT: writes the input, runs
 * run(IN, OUT, backend) with the math and the auto backend, checking each. */
typedef attn_status (*fuzz_file_cmd)(const char *in, const char *out, attn_backend backend);
void fuzz_file_run(const char *cmd, fuzz_file_cmd run, const uint8_t *data, size_t size);

#endif
