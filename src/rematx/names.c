/* names.c - messages listing a name table (names.h). */
#include <stdio.h>

#include "remat.h"
#include "rematx/names.h"

const char *rematx_algorithm_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int a = 0; a < REMAT_ALG_COUNT && used < size; a++) {
        int w = snprintf(buf + used, size - used, "%s%s", a ? ", " : "",
                         remat_algorithm_name((enum remat_algorithm)a));
        used += w > 0 ? (size_t)w : 0;
    }
    return buf;
}
