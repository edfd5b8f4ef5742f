/* One spelling of booleans for every key=value the library and the tool
 * read (safetensors metadata of attn sdpa / attn layer files, tool options):
 * true/false, 1/0, yes/no, on/off, in any case ("True" and "False" as
 * Python's str() writes PyTorch's arguments). Internal. */
#ifndef ATTN_CORE_PARSE_BOOL_H
#define ATTN_CORE_PARSE_BOOL_H

/* 1 with *out = 0 or 1 when s is a boolean; 0 (*out unchanged) otherwise. */
int attn_parse_bool(const char *s, int *out);

/* The accepted spellings, for messages. */
#define ATTN_BOOL_SPELLINGS "true/false, 1/0, yes/no or on/off"

#endif
