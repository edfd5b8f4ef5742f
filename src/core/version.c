/* The library's version at run time (include/attn/version.h). */
#include "attn/version.h"

int attn_version(void) { return ATTN_VERSION_NUMBER; }

const char *attn_version_string(void) { return ATTN_VERSION; }
