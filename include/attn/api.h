/* attn — ATTN_API marks the library's public functions. libattn is built
 * with -fvisibility=hidden, so libattn.so exports exactly the functions
 * declared ATTN_API in include/ (all named attn_*); internal helpers stay
 * linkable inside the library and from libattn.a but are not part of the ABI.
 * Define ATTN_API before including attn.h to override (e.g. empty). */
#ifndef ATTN_API_H
#define ATTN_API_H

#ifndef ATTN_API
#if defined(__GNUC__) && __GNUC__ >= 4
#define ATTN_API __attribute__((visibility("default")))
#else
#define ATTN_API
#endif
#endif

#endif
