/* big_alloc.c - allocations of a million stages' arrays. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "remat_private.h"

static void big_advise(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    /* A fresh array of tens of MiB is faulted in 4 KiB at a time: at a
     * million stages that is ten thousand faults per array, a third of
     * paper-linear's time.  Transparent huge pages, where the kernel
     * offers them on request (enabled = madvise), take 2 MiB a fault.  The
     * hint covers the whole pages inside the block; it changes nothing but
     * the time, and a refusal is ignored. */
    if (p != NULL && bytes >= REMAT__BIG_BYTES) {
        long page = sysconf(_SC_PAGESIZE);
        if (page <= 0)
            return;
        uintptr_t u = (uintptr_t)page;
        uintptr_t a = ((uintptr_t)p + u - 1) / u * u;
        uintptr_t e = ((uintptr_t)p + bytes) / u * u;
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)p;
    (void)bytes;
#endif
}

void *remat__big_alloc(size_t bytes)
{
    void *p = malloc(bytes);
    big_advise(p, bytes);
    return p;
}

void *remat__big_grow(void *p, size_t old_bytes, size_t bytes)
{
    if (bytes < REMAT__BIG_BYTES)
        return realloc(p, bytes);
    /* realloc would copy into (or move) 4 KiB pages before any hint could
     * reach them; a new block takes the hint first, then the copy. */
    void *q = remat__big_alloc(bytes);
    if (q == NULL)
        return NULL;
    if (old_bytes > 0)
        memcpy(q, p, old_bytes < bytes ? old_bytes : bytes);
    free(p);
    return q;
}
