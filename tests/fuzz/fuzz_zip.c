/* fuzz_zip.c - the TorchScript archive check (api/zipcheck.c) on any file:
 * never a crash or a read out of bounds, a verdict of the enum, and a
 * reason that is one line of UTF-8 text (it goes into a problem's JSON)
 * whenever the archive is refused.  An accepted archive's info holds what
 * the upload route relies on: entries within the limit, a root folder, and
 * data.pkl's bytes inside the file; a stored data.pkl is then scanned for
 * the module's children (api/torchpickle.c), as the upload does.
 *
 * The file is the input itself, written to one temporary file that each run
 * rewrites (the check reads with pread, as it reads an upload). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz_check.h"
#include "torchpickle.h"
#include "zipcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int file_of(const uint8_t *data, size_t size)
{
    static FILE *f; /* the harness's one scratch file, for every run */
    if (f == NULL)
        f = tmpfile();
    FUZZ_CHECK(f != NULL, "no temporary file");
    int fd = fileno(f);
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        FUZZ_CHECK(w > 0, "pwrite");
        off += (size_t)w;
    }
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = file_of(data, size);
    /* Small limits, so that the fuzzer reaches them. */
    const struct rematd_zip_limits lim = {
        .max_entries = 64, .max_total_bytes = 1u << 20, .max_ratio = 50};
    struct rematd_zip_info info;
    memset(&info, 0xa5, sizeof info);
    char why[320];
    why[0] = '\0';
    enum rematd_zip_verdict v = rematd_zipcheck_fd(fd, size, &lim, &info, why, sizeof why);
    FUZZ_CHECK(v == REMATD_ZIP_OK || v == REMATD_ZIP_INVALID || v == REMATD_ZIP_NOT_TORCHSCRIPT ||
                   v == REMATD_ZIP_UNSAFE || v == REMATD_ZIP_IO,
               "verdict %d", (int)v);
    if (v != REMATD_ZIP_OK) {
        FUZZ_CHECK(why[0] != '\0' && strchr(why, '\n') == NULL, "reason '%s'", why);
        json_t *j = json_string(why);
        FUZZ_CHECK(j != NULL, "the reason is not UTF-8 text");
        json_decref(j);
        return 0;
    }
    FUZZ_CHECK(info.entries >= 2 && info.entries <= lim.max_entries, "%zu entries", info.entries);
    FUZZ_CHECK(info.uncompressed_bytes <= lim.max_total_bytes, "%llu bytes",
               (unsigned long long)info.uncompressed_bytes);
    FUZZ_CHECK(memchr(info.root, '\0', sizeof info.root) != NULL && info.root[0] != '\0',
               "root folder");
    FUZZ_CHECK(info.pickle_offset <= size && info.pickle_bytes <= size - info.pickle_offset,
               "data.pkl at %llu+%llu of %zu", (unsigned long long)info.pickle_offset,
               (unsigned long long)info.pickle_bytes, size);
    if (info.pickle_stored) {
        json_t *children =
            rematd_pickle_children(data + info.pickle_offset, (size_t)info.pickle_bytes);
        FUZZ_CHECK(children == NULL || json_is_array(children), "children");
        json_decref(children);
    }
    return 0;
}
