/* zipcheck.h - is an uploaded file a TorchScript archive, and a safe one?
 *
 * What torch.jit.save writes is a zip file whose entries all sit under one
 * folder (<name>/data.pkl, <name>/code/..., <name>/constants.pkl,
 * <name>/version, <name>/data/N for the tensors).  rematd checks that shape
 * from the central directory alone, without unpacking or running anything,
 * and refuses what could hurt whoever unpacks it later: names that climb
 * out of the folder, zip bombs (declared sizes past a total, entries
 * compressed past a ratio, entries whose data overlap), too many entries.
 * The sizes checked are the declared ones; libtorch's reader (miniz) fails
 * an entry whose data inflate to more than it declares, so the declared
 * sizes bound what a worker will ever hold. */
#ifndef REMATD_ZIPCHECK_H
#define REMATD_ZIPCHECK_H

#include <stddef.h>
#include <stdint.h>

enum rematd_zip_verdict {
    REMATD_ZIP_OK = 0,
    REMATD_ZIP_INVALID = 1,         /* not a zip file, or a damaged one: 400 invalid-archive */
    REMATD_ZIP_NOT_TORCHSCRIPT = 2, /* a zip, not TorchScript's layout: 422 not-torchscript */
    REMATD_ZIP_UNSAFE = 3,          /* traversal, a bomb, too many entries: 422 unsafe-archive */
    REMATD_ZIP_IO = -1,             /* the file could not be read (or no memory): 500 */
};

struct rematd_zip_limits {
    size_t max_entries;
    uint64_t max_total_bytes; /* sum of the entries' uncompressed sizes */
    unsigned max_ratio;       /* uncompressed / compressed, for entries over 64 KiB */
};

struct rematd_zip_info {
    size_t entries;
    uint64_t uncompressed_bytes;
    char root[128]; /* the folder every entry sits in */
    /* Where <root>/data.pkl's data sit in the file, and whether they are
     * stored as they are (not deflated), so that they can be read there. */
    uint64_t pickle_offset, pickle_bytes;
    int pickle_stored;
};

/* Checks the size bytes of fd (read with pread; the offset is not used).
 * Returns the verdict, with a one-line reason in why (naming the entry at
 * fault where there is one); info is filled on REMATD_ZIP_OK. */
enum rematd_zip_verdict rematd_zipcheck_fd(int fd, uint64_t size,
                                           const struct rematd_zip_limits *lim,
                                           struct rematd_zip_info *info, char *why, size_t whylen);

#endif
