/* utf8.h - UTF-8 as RFC 3629 has it (no overlong forms, no surrogates,
 * nothing past U+10FFFF), for the programs' text that must stay text: a
 * request's path and log lines (rematd), an archive's entry names
 * (api/zipcheck.c), a job's failure reason (the worker). */
#ifndef REMATX_UTF8_H
#define REMATX_UTF8_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The length (1..4) of the well-formed character that s (n bytes) starts
 * with, or 0 when it starts with none (or n is 0). */
size_t rematx_utf8_seq(const unsigned char *s, size_t n);
/* 1 when all n bytes of s are well-formed UTF-8, else 0. */
int rematx_utf8_valid(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
