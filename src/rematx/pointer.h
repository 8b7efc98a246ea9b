/* pointer.h - JSON pointers (RFC 6901) to a member a request named: the
 * problem answers' "pointer" must name the member even when its key holds
 * '/' or '~'. */
#ifndef REMATX_POINTER_H
#define REMATX_POINTER_H

#include <stddef.h>

/* Appends "/" and key, escaped ('~' as "~0", '/' as "~1"), to the
 * NUL-terminated pointer in buf (size bytes).  What does not fit is cut
 * where a whole character of the key ends, never inside an escape or a
 * UTF-8 sequence, and buf stays terminated.  Returns 0, or -1 when cut. */
int rematx_pointer_append(char *buf, size_t size, const char *key);

#endif
