/* fuzz_check.h - what a fuzz target does when an invariant fails: print it
 * and abort, which libFuzzer records as a crash with the input that made it
 * (and which fails make check when the corpus is replayed). */
#ifndef REMAT_FUZZ_CHECK_H
#define REMAT_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
