/* The tool's messages on stderr, one style for every command:
 *   attn CMD: FILE: reason     (a file's problem; strerror where a system call failed)
 *   attn CMD: reason           (anything else)
 * and its exit statuses (README, "Exit status"). */
#ifndef ATTN_CLI_MSG_H
#define ATTN_CLI_MSG_H

#include <stdarg.h>

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

/* The command the messages name ("train", "bench gemm"); main sets it
 * before running one. Until then messages say "attn: ...". */
void cli_set_command(const char *name);
const char *cli_command(void);

/* "attn CMD: [FILE: ]<attn_last_error()>"; file may be NULL. When the
 * library's message already names the file ("cannot open 'F': reason", or
 * "F: reason") it is said once. Returns CLI_FAILED. */
int cli_fail(const char *file);
/* "attn CMD: [FILE: ]<printf>"; returns CLI_FAILED. */
int cli_error(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "attn CMD: [FILE: ]<what>: <strerror(errno)>" for a failed system call;
 * returns CLI_FAILED. */
int cli_syserr(const char *file, const char *what);
/* A usage error: "attn CMD: <printf>"; returns CLI_USAGE. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A warning, the run goes on: "attn CMD: warning: <printf>". */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
