/* big_alloc.c - allocations of a million stages' arrays. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "remat_private.h"

void *remat__big_alloc(size_t bytes)
{
    void *p = malloc(bytes);
#ifdef MADV_HUGEPAGE
    /* A fresh array of tens of MiB is faulted in 4 KiB at a time: at a
     * million stages that is ten thousand faults per array, a third of
     * paper-linear's time.  Transparent huge pages, where the kernel
     * offers them on request (enabled = madvise), take 2 MiB a fault.  The
     * hint covers the whole pages inside the block; it changes nothing but
     * the time, and a refusal is ignored. */
    if (p != NULL && bytes >= REMAT__BIG_BYTES) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t a = ((uintptr_t)p + page - 1) / page * page;
        uintptr_t e = ((uintptr_t)p + bytes) / page * page;
        if (page > 0 && e > a)
            (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#endif
    return p;
}
