/* LD_PRELOAD shim for test_alloc_sweep: fails one allocation of a program.
 *   ATTN_FAIL_ALLOC=N      the Nth allocation counted from main() (1-based)
 *                          returns NULL (ENOMEM); every other one succeeds
 *   ATTN_FAIL_ALLOC_HIT=F  when the failure happens, file F is created
 *                          (so the caller knows N was reached)
 * Counted: malloc, calloc, realloc (to a non-zero size), posix_memalign,
 * aligned_alloc, memalign. Allocations before main() (the dynamic loader,
 * library constructors) are not counted. Without ATTN_FAIL_ALLOC nothing
 * fails. glibc only (its __libc_* entry points). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

static atomic_long counted = -1; /* -1 until main() */
static long fail_at;             /* 0: never */
static const char *hit_path;

/* 1 if this allocation is the one to fail */
static int fail_now(void) {
  if (fail_at <= 0 || atomic_load(&counted) < 0) return 0;
  if (atomic_fetch_add(&counted, 1) + 1 != fail_at) return 0;
  if (hit_path) {
    int fd = open(hit_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  }
  errno = ENOMEM;
  return 1;
}

void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return fail_now() ? NULL : __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return n && fail_now() ? NULL : __libc_realloc(p, n); }
void *memalign(size_t align, size_t n) { return fail_now() ? NULL : __libc_memalign(align, n); }
void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
  void *p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* Counting starts at main: the shim wraps it through __libc_start_main. */
typedef int (*main_fn)(int, char **, char **);
static main_fn real_main;

static int counted_main(int argc, char **argv, char **envp) {
  const char *n = getenv("ATTN_FAIL_ALLOC");
  fail_at = n ? atol(n) : 0;
  hit_path = getenv("ATTN_FAIL_ALLOC_HIT");
  atomic_store(&counted, 0);
  return real_main(argc, argv, envp);
}

typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void),
                        void *);
int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
  start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
  real_main = main;
  return real(counted_main, argc, argv, init, fini, rtld_fini, stack_end);
}
