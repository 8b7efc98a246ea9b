/* fuzz_pickle.c - the pickle scan (api/torchpickle.c) on any bytes: never a
 * crash, a read out of bounds or a hang, and an answer that keeps the
 * contract the upload route relies on: NULL, or an array of at most
 * REMATD_PICKLE_MAX_CHILDREN names, each a string of UTF-8 text. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "fuzz_check.h"
#include "torchpickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *a = rematd_pickle_children(data, size);
    if (a == NULL)
        return 0;
    FUZZ_CHECK(json_is_array(a), "not an array");
    size_t n = json_array_size(a);
    FUZZ_CHECK(n <= REMATD_PICKLE_MAX_CHILDREN, "%zu children", n);
    for (size_t i = 0; i < n; i++) {
        json_t *name = json_array_get(a, i);
        FUZZ_CHECK(json_is_string(name), "child %zu is not a string", i);
        /* A name that went into the array went in as UTF-8 text. */
        json_t *copy = json_stringn(json_string_value(name), json_string_length(name));
        FUZZ_CHECK(copy != NULL, "child %zu is not UTF-8", i);
        json_decref(copy);
    }
    json_decref(a);
    return 0;
}
