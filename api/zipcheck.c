/* zipcheck.c - the TorchScript archive check (zipcheck.h), from the central
 * directory (APPNOTE.TXT 6.3, with its Zip64 records) and each entry's
 * local header. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rematx/utf8.h"
#include "zipcheck.h"

/* The central directory is read whole: at most this many bytes. */
#define MAX_CD_BYTES (64u << 20)
/* Ratio checks apply to entries past this size: small text compresses
 * well and is harmless. */
#define RATIO_FLOOR (64u << 10)

struct extent {
    uint64_t start, end; /* local header to the end of the entry's data */
    size_t index;
};

static uint16_t u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const unsigned char *p)
{
    return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

static enum rematd_zip_verdict say(char *why, size_t whylen, enum rematd_zip_verdict v,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum rematd_zip_verdict say(char *why, size_t whylen, enum rematd_zip_verdict v,
                                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return v;
}

/* A name that, unpacked, would land outside the folder it is unpacked in:
 * absolute, a drive, a backslash (a separator on Windows), a .. segment. */
static int climbs(const char *name, size_t n)
{
    if (n == 0 || name[0] == '/' || memchr(name, '\\', n) || memchr(name, '\0', n))
        return 1;
    if (n >= 2 && name[1] == ':')
        return 1;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && name[j] != '/')
            j++;
        if (j - i == 2 && name[i] == '.' && name[i + 1] == '.')
            return 1;
        i = j + 1;
    }
    return 0;
}

/* How many bytes of a UTF-8 name a reason shows: at most 100, never half a
 * character. */
static int shown_bytes(const char *name, size_t n)
{
    size_t k = n < 100 ? n : 100;
    while (k < n && k > 0 && ((unsigned char)name[k] & 0xc0) == 0x80)
        k--;
    return (int)k;
}

struct entry_name {
    const char *p;
    size_t n;
    size_t index;
};

static int by_name(const void *a, const void *b)
{
    const struct entry_name *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, m);
    if (c)
        return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

static int by_start(const void *a, const void *b)
{
    const struct extent *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The end of central directory record (and its Zip64 twin when the sizes
 * overflow 32 bits): how many entries, where the directory is. */
static enum rematd_zip_verdict find_directory(int fd, uint64_t size, uint64_t *entries,
                                              uint64_t *cd_off, uint64_t *cd_size, char *why,
                                              size_t whylen)
{
    if (size < 22)
        return say(why, whylen, REMATD_ZIP_INVALID, "%llu bytes: too short to be a zip file",
                   (unsigned long long)size);
    size_t tail = size < 22 + 65535 ? (size_t)size : 22 + 65535;
    unsigned char *t = malloc(tail);
    if (!t)
        return say(why, whylen, REMATD_ZIP_IO, "out of memory");
    if (read_at(fd, t, tail, size - tail) < 0) {
        free(t);
        return say(why, whylen, REMATD_ZIP_IO, "cannot read the archive");
    }
    size_t at = tail - 22 + 1;
    int found = 0;
    while (at-- > 0)
        if (u32(t + at) == 0x06054b50 && at + 22 + u16(t + at + 20) == tail) {
            found = 1;
            break;
        }
    if (!found) {
        free(t);
        return say(why, whylen, REMATD_ZIP_INVALID,
                   "no end of central directory record: not a zip file");
    }
    const unsigned char *e = t + at;
    uint64_t eocd = size - tail + at;
    if (u16(e + 4) != 0 || u16(e + 6) != 0 || u16(e + 8) != u16(e + 10)) {
        free(t);
        return say(why, whylen, REMATD_ZIP_INVALID, "a multi-part zip file");
    }
    *entries = u16(e + 10);
    *cd_size = u32(e + 12);
    *cd_off = u32(e + 16);
    int zip64 = *entries == 0xffff || *cd_size == 0xffffffff || *cd_off == 0xffffffff;
    free(t);
    if (eocd >= 20) {
        unsigned char loc[20], z[56];
        if (read_at(fd, loc, sizeof loc, eocd - 20) < 0)
            return say(why, whylen, REMATD_ZIP_IO, "cannot read the archive");
        if (u32(loc) == 0x07064b50) {
            uint64_t zo = u64(loc + 8);
            if (zo > eocd - 20 || eocd - 20 - zo < sizeof z || read_at(fd, z, sizeof z, zo) < 0 ||
                u32(z) != 0x06064b50)
                return say(why, whylen, REMATD_ZIP_INVALID,
                           "the Zip64 end of central directory record is missing or damaged");
            *entries = u64(z + 32);
            *cd_size = u64(z + 40);
            *cd_off = u64(z + 48);
            zip64 = 0;
            eocd = zo;
        }
    }
    if (zip64)
        return say(why, whylen, REMATD_ZIP_INVALID,
                   "the sizes need Zip64 records, which are missing");
    if (*cd_off > eocd || *cd_size > eocd - *cd_off)
        return say(why, whylen, REMATD_ZIP_INVALID,
                   "the central directory lies outside the file (truncated?)");
    return REMATD_ZIP_OK;
}

enum rematd_zip_verdict rematd_zipcheck_fd(int fd, uint64_t size,
                                           const struct rematd_zip_limits *lim,
                                           struct rematd_zip_info *info, char *why, size_t whylen)
{
    uint64_t n_entries = 0, cd_off = 0, cd_size = 0;
    enum rematd_zip_verdict v =
        find_directory(fd, size, &n_entries, &cd_off, &cd_size, why, whylen);
    if (v != REMATD_ZIP_OK)
        return v;
    if (n_entries == 0)
        return say(why, whylen, REMATD_ZIP_NOT_TORCHSCRIPT, "an empty zip file");
    if (n_entries > lim->max_entries)
        return say(why, whylen, REMATD_ZIP_UNSAFE, "%llu entries; at most %zu are accepted",
                   (unsigned long long)n_entries, lim->max_entries);
    /* Each entry takes at least 46 bytes of directory. */
    if (cd_size > MAX_CD_BYTES || cd_size < 46 * n_entries)
        return say(why, whylen, cd_size > MAX_CD_BYTES ? REMATD_ZIP_UNSAFE : REMATD_ZIP_INVALID,
                   "a central directory of %llu bytes for %llu entries",
                   (unsigned long long)cd_size, (unsigned long long)n_entries);
    unsigned char *cd = malloc(cd_size ? (size_t)cd_size : 1);
    struct extent *ext = calloc((size_t)n_entries, sizeof *ext);
    struct entry_name *names = calloc((size_t)n_entries, sizeof *names);
    if (!cd || !ext || !names) {
        free(cd);
        free(ext);
        free(names);
        return say(why, whylen, REMATD_ZIP_IO, "out of memory");
    }
    v = REMATD_ZIP_OK;
    if (read_at(fd, cd, (size_t)cd_size, cd_off) < 0) {
        v = say(why, whylen, REMATD_ZIP_IO, "cannot read the central directory");
        goto out;
    }
    char root[128] = "";
    size_t root_len = 0;
    int has_data_pkl = 0, has_code = 0, pkl_stored = 0;
    uint64_t total = 0, pkl_offset = 0, pkl_bytes = 0;
    size_t pos = 0;
    for (size_t i = 0; i < n_entries; i++) {
        const unsigned char *h = cd + pos;
        if (cd_size - pos < 46 || u32(h) != 0x02014b50) {
            v = say(why, whylen, REMATD_ZIP_INVALID, "central directory entry %zu is damaged", i);
            goto out;
        }
        size_t nl = u16(h + 28), xl = u16(h + 30), cl = u16(h + 32);
        if (cd_size - pos - 46 < nl + xl + cl) {
            v = say(why, whylen, REMATD_ZIP_INVALID, "central directory entry %zu is damaged", i);
            goto out;
        }
        const char *name = (const char *)h + 46;
        /* A name goes into a problem's JSON text and is what libtorch looks
         * entries up by: one that is not text is refused, not passed on. */
        if (!rematx_utf8_valid(name, nl)) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entry %zu's name is not UTF-8 text: archives whose names rematd and "
                    "libtorch could read differently are refused",
                    i);
            goto out;
        }
        /* A control character (a newline, an escape) in a name would reach
         * reasons, logs and terminals as it is; no writer of TorchScript
         * archives makes one. */
        for (size_t k = 0; k < nl; k++)
            if (h[46 + k] < 0x20 || h[46 + k] == 0x7f) {
                v = say(why, whylen, REMATD_ZIP_UNSAFE,
                        "entry %zu's name has a control character (byte %zu is 0x%02x)", i, k,
                        h[46 + k]);
                goto out;
            }
        int shown = shown_bytes(name, nl);
        names[i] = (struct entry_name){name, nl, i};
        unsigned flags = u16(h + 8), method = u16(h + 10);
        uint64_t csize = u32(h + 20), usize = u32(h + 24), loff = u32(h + 42);
        /* Zip64 extended information: the 64-bit values of the fields
         * that hold 0xffffffff, in this order. */
        for (size_t x = 0; x + 4 <= xl;) {
            const unsigned char *f = h + 46 + nl + x;
            size_t fl = u16(f + 2);
            if (x + 4 + fl > xl)
                break;
            if (u16(f) == 0x0001) {
                size_t k = 4;
                if (usize == 0xffffffff && k + 8 <= 4 + fl)
                    usize = u64(f + k), k += 8;
                if (csize == 0xffffffff && k + 8 <= 4 + fl)
                    csize = u64(f + k), k += 8;
                if (loff == 0xffffffff && k + 8 <= 4 + fl)
                    loff = u64(f + k);
            }
            x += 4 + fl;
        }
        if (climbs(name, nl)) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entry '%.*s' would be unpacked outside the archive's folder", shown, name);
            goto out;
        }
        if (flags & 1) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE, "entry '%.*s' is encrypted", shown, name);
            goto out;
        }
        if (method != 0 && method != 8) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entry '%.*s' uses compression method %u; only stored (0) and deflate (8)"
                    " are read",
                    shown, name, method);
            goto out;
        }
        if (method == 0 && csize != usize) {
            v = say(why, whylen, REMATD_ZIP_INVALID,
                    "entry '%.*s' is stored but its two sizes differ", shown, name);
            goto out;
        }
        if (usize > lim->max_total_bytes - total) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "the entries unpack to more than %llu bytes (at '%.*s'): a zip bomb?",
                    (unsigned long long)lim->max_total_bytes, shown, name);
            goto out;
        }
        total += usize;
        if (usize > RATIO_FLOOR && (csize == 0 || usize / csize >= lim->max_ratio)) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entry '%.*s' unpacks %llu bytes from %llu, past the ratio of %u: a zip bomb?",
                    shown, name, (unsigned long long)usize, (unsigned long long)csize,
                    lim->max_ratio);
            goto out;
        }
        /* The local header: where the data really start. */
        unsigned char lh[30];
        if (loff > cd_off || cd_off - loff < 30 || read_at(fd, lh, sizeof lh, loff) < 0 ||
            u32(lh) != 0x04034b50) {
            v = say(why, whylen, REMATD_ZIP_INVALID, "entry '%.*s' has no local header", shown,
                    name);
            goto out;
        }
        uint64_t data = loff + 30 + u16(lh + 26) + u16(lh + 28);
        if (data > cd_off || csize > cd_off - data) {
            v = say(why, whylen, REMATD_ZIP_INVALID,
                    "entry '%.*s' runs past the central directory (truncated?)", shown, name);
            goto out;
        }
        ext[i] = (struct extent){loff, data + csize, i};
        /* TorchScript's layout: one folder, data.pkl and code/ in it. */
        const char *slash = memchr(name, '/', nl);
        size_t rl = slash ? (size_t)(slash - name) : nl;
        if (!slash || rl == 0 || rl >= sizeof root ||
            (i > 0 && (rl != root_len || memcmp(name, root, rl) != 0))) {
            v = say(why, whylen, REMATD_ZIP_NOT_TORCHSCRIPT,
                    "entry '%.*s' is not in the archive's one folder (TorchScript archives "
                    "hold <name>/data.pkl and <name>/code/)",
                    shown, name);
            goto out;
        }
        if (i == 0) {
            memcpy(root, name, rl);
            root[rl] = '\0';
            root_len = rl;
        }
        const char *rest = name + rl + 1;
        size_t restl = nl - rl - 1;
        if (restl == 8 && memcmp(rest, "data.pkl", 8) == 0) {
            has_data_pkl = 1;
            pkl_offset = data;
            pkl_bytes = csize;
            pkl_stored = method == 0;
        }
        if (restl > 5 && memcmp(rest, "code/", 5) == 0)
            has_code = 1;
        pos += 46 + nl + xl + cl;
    }
    /* Two entries of one name: rematd checks one and libtorch may load the
     * other (zip readers differ on which wins), so neither is trusted. */
    qsort(names, (size_t)n_entries, sizeof *names, by_name);
    for (size_t i = 1; i < n_entries; i++)
        if (by_name(&names[i - 1], &names[i]) == 0) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entries %zu and %zu are both named '%.*s': an archive whose readers could "
                    "disagree",
                    names[i - 1].index, names[i].index, shown_bytes(names[i].p, names[i].n),
                    names[i].p);
            goto out;
        }
    /* A "better zip bomb" points many entries at the same data. */
    qsort(ext, (size_t)n_entries, sizeof *ext, by_start);
    for (size_t i = 1; i < n_entries; i++)
        if (ext[i].start < ext[i - 1].end) {
            v = say(why, whylen, REMATD_ZIP_UNSAFE,
                    "entries %zu and %zu overlap in the file: a zip bomb?", ext[i - 1].index,
                    ext[i].index);
            goto out;
        }
    if (!has_data_pkl || !has_code) {
        v = say(why, whylen, REMATD_ZIP_NOT_TORCHSCRIPT,
                "no %s/%s: not a TorchScript archive (torch.jit.script(m).save(path) or "
                "torch.jit.trace(m, x).save(path) writes one; torch.save does not)",
                root, has_data_pkl ? "code/" : "data.pkl");
        goto out;
    }
    if (info) {
        info->entries = (size_t)n_entries;
        info->uncompressed_bytes = total;
        memcpy(info->root, root, sizeof info->root);
        info->pickle_offset = pkl_offset;
        info->pickle_bytes = pkl_bytes;
        info->pickle_stored = pkl_stored;
    }
out:
    free(cd);
    free(ext);
    free(names);
    return v;
}
