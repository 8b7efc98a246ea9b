/* pointer.c - JSON pointers to a named member (pointer.h). */
#include "config.h"

#include <string.h>

#include "rematx/pointer.h"

int rematx_pointer_append(char *buf, size_t size, const char *key)
{
    if (size == 0)
        return -1;
    size_t n = strnlen(buf, size - 1);
    buf[n] = '\0';
    if (n + 1 >= size)
        return -1;
    buf[n++] = '/';
    for (const unsigned char *k = (const unsigned char *)key; *k;) {
        /* One character of the key: an escape, or a whole UTF-8 sequence. */
        const char *out = (const char *)k;
        size_t in = 1, len = 1;
        if (*k == '~')
            out = "~0", len = 2;
        else if (*k == '/')
            out = "~1", len = 2;
        else if (*k >= 0x80)
            while ((k[in] & 0xc0) == 0x80)
                in++, len++;
        if (n + len >= size) {
            buf[n] = '\0';
            return -1;
        }
        memcpy(buf + n, out, len);
        n += len;
        k += in;
    }
    buf[n] = '\0';
    return 0;
}
