/* The TorchScript archive check (api/zipcheck.c) on crafted zip files: a
 * well-formed archive in TorchScript's layout passes; random bytes, a
 * truncated archive, a torch.save-style archive without code/, names that
 * climb out (../, absolute, backslash), a bomb by total size, one by
 * ratio, overlapping entries, too many entries, two entries of one name,
 * names that are not UTF-8 and a Zip64 archive each get the verdict they
 * should, with a reason naming the entry that is itself UTF-8 text (jansson
 * is the judge: the reason goes into a problem's JSON). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "zipcheck.h"

struct entry {
    const char *name;
    const char *data;
    int method;      /* 0 stored, 8 deflate (the bytes are not real deflate: not read) */
    uint64_t usize;  /* declared uncompressed size; 0: strlen(data) */
    int shared_with; /* >= 0: point this entry's header at that entry's (overlap) */
};

struct zbuf {
    unsigned char b[1 << 16];
    size_t n;
};

static void put(struct zbuf *z, const void *p, size_t n)
{
    assert_true(z->n + n <= sizeof z->b);
    memcpy(z->b + z->n, p, n);
    z->n += n;
}
static void p16(struct zbuf *z, unsigned v)
{
    unsigned char c[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(z, c, 2);
}
static void p32(struct zbuf *z, uint32_t v)
{
    p16(z, v & 0xffff);
    p16(z, v >> 16);
}
static void p64(struct zbuf *z, uint64_t v)
{
    p32(z, (uint32_t)v);
    p32(z, (uint32_t)(v >> 32));
}

/* A zip file of the entries; zip64 writes the Zip64 end records (and the
 * 16-bit count as 0xffff) as writers do for big archives. */
static void build(struct zbuf *z, const struct entry *e, size_t n, int zip64)
{
    uint32_t off[64];
    z->n = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = (uint32_t)z->n;
        if (e[i].shared_with >= 0) {
            off[i] = off[e[i].shared_with];
            continue;
        }
        size_t len = strlen(e[i].data);
        p32(z, 0x04034b50);
        p16(z, 20);
        p16(z, 0);
        p16(z, (unsigned)e[i].method);
        p32(z, 0);
        p32(z, 0);
        p32(z, (uint32_t)len);
        p32(z, (uint32_t)(e[i].usize ? e[i].usize : len));
        p16(z, (unsigned)strlen(e[i].name));
        p16(z, 0);
        put(z, e[i].name, strlen(e[i].name));
        put(z, e[i].data, len);
    }
    size_t cd = z->n;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(e[i].data);
        p32(z, 0x02014b50);
        p16(z, 20);
        p16(z, 20);
        p16(z, 0);
        p16(z, (unsigned)e[i].method);
        p32(z, 0);
        p32(z, 0);
        p32(z, (uint32_t)len);
        uint64_t us = e[i].usize ? e[i].usize : len;
        p32(z, us > 0xfffffffeu ? 0xffffffffu : (uint32_t)us);
        p16(z, (unsigned)strlen(e[i].name));
        p16(z, us > 0xfffffffeu ? 12 : 0);
        p16(z, 0);
        p16(z, 0);
        p16(z, 0);
        p32(z, 0);
        p32(z, off[i]);
        put(z, e[i].name, strlen(e[i].name));
        if (us > 0xfffffffeu) {
            p16(z, 1);
            p16(z, 8);
            p64(z, us);
        }
    }
    size_t cd_size = z->n - cd;
    if (zip64) {
        size_t z64 = z->n;
        p32(z, 0x06064b50);
        p64(z, 44);
        p16(z, 45);
        p16(z, 45);
        p32(z, 0);
        p32(z, 0);
        p64(z, n);
        p64(z, n);
        p64(z, cd_size);
        p64(z, cd);
        p32(z, 0x07064b50);
        p32(z, 0);
        p64(z, z64);
        p32(z, 1);
    }
    p32(z, 0x06054b50);
    p16(z, 0);
    p16(z, 0);
    p16(z, zip64 ? 0xffff : (unsigned)n);
    p16(z, zip64 ? 0xffff : (unsigned)n);
    p32(z, (uint32_t)cd_size);
    p32(z, (uint32_t)cd);
    p16(z, 0);
}

static const struct rematd_zip_limits LIM = {
    .max_entries = 16, .max_total_bytes = 1u << 20, .max_ratio = 100};

static enum rematd_zip_verdict check_bytes(const void *p, size_t n, char *why,
                                           struct rematd_zip_info *info)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fflush(f);
    enum rematd_zip_verdict v = rematd_zipcheck_fd(fileno(f), n, &LIM, info, why, 256);
    fclose(f);
    return v;
}

static enum rematd_zip_verdict check(const struct entry *e, size_t n, int zip64, char *why)
{
    static struct zbuf z;
    build(&z, e, n, zip64);
    return check_bytes(z.b, z.n, why, NULL);
}

#define E(name, data)                                                                              \
    {                                                                                              \
        name, data, 0, 0, -1                                                                       \
    }

static const struct entry good[] = {
    E("net/data.pkl", "\x80\x02}."),
    E("net/code/__torch__/net.py", "class Net(Module):\n  pass\n"),
    E("net/constants.pkl", "\x80\x02)."),
    E("net/data/0", "0123456789abcdef"),
    E("net/version", "3\n"),
};

static void test_good(void **state)
{
    char why[256] = "";
    static struct zbuf z;
    build(&z, good, 5, 0);
    struct rematd_zip_info info;
    assert_int_equal(check_bytes(z.b, z.n, why, &info), REMATD_ZIP_OK);
    assert_int_equal(info.entries, 5);
    assert_string_equal(info.root, "net");
    assert_int_equal(info.uncompressed_bytes, 4 + 26 + 4 + 16 + 2);
    /* The same with Zip64 end records. */
    assert_int_equal(check(good, 5, 1, why), REMATD_ZIP_OK);
}

static void test_not_zip(void **state)
{
    char why[256] = "";
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 2654435761u >> 13);
    assert_int_equal(check_bytes(junk, sizeof junk, why, NULL), REMATD_ZIP_INVALID);
    assert_non_null(strstr(why, "not a zip"));
    assert_int_equal(check_bytes("PK", 2, why, NULL), REMATD_ZIP_INVALID);
    assert_int_equal(check_bytes("", 0, why, NULL), REMATD_ZIP_INVALID);
}

static void test_truncated(void **state)
{
    char why[256] = "";
    static struct zbuf z;
    build(&z, good, 5, 0);
    /* Cut anywhere: the end record is gone, or it points past the file. */
    for (size_t cut = 1; cut < z.n; cut += 7)
        assert_int_equal(check_bytes(z.b, z.n - cut, why, NULL), REMATD_ZIP_INVALID);
    /* Cut the data but keep a copy of the end record: the directory now
     * points outside the file. */
    unsigned char cut[1 << 12];
    size_t keep = 40;
    memcpy(cut, z.b, keep);
    memcpy(cut + keep, z.b + z.n - 22, 22);
    assert_int_equal(check_bytes(cut, keep + 22, why, NULL), REMATD_ZIP_INVALID);
}

static void test_not_torchscript(void **state)
{
    char why[256] = "";
    /* torch.save's archive: data.pkl and data/, no code/. */
    const struct entry saved[] = {E("archive/data.pkl", "x"), E("archive/data/0", "y"),
                                  E("archive/version", "3")};
    assert_int_equal(check(saved, 3, 0, why), REMATD_ZIP_NOT_TORCHSCRIPT);
    assert_non_null(strstr(why, "archive/code/"));
    /* Two folders. */
    const struct entry two[] = {E("a/data.pkl", "x"), E("b/code/x.py", "y")};
    assert_int_equal(check(two, 2, 0, why), REMATD_ZIP_NOT_TORCHSCRIPT);
    assert_non_null(strstr(why, "b/code/x.py"));
    /* A file at the top. */
    const struct entry top[] = {E("readme.txt", "hi")};
    assert_int_equal(check(top, 1, 0, why), REMATD_ZIP_NOT_TORCHSCRIPT);
    /* No entries at all. */
    assert_int_equal(check(top, 0, 0, why), REMATD_ZIP_NOT_TORCHSCRIPT);
}

static void test_traversal(void **state)
{
    char why[256] = "";
    const char *bad[] = {"net/../../etc/passwd",
                         "../net/data.pkl",
                         "/net/data.pkl",
                         "net\\..\\x",
                         "C:/net/data.pkl",
                         "net/code/..",
                         ".."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct entry e[3] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"), E(bad[i], "z")};
        assert_int_equal(check(e, 3, 0, why), REMATD_ZIP_UNSAFE);
        assert_non_null(strstr(why, "outside"));
    }
    /* Dots that are not a parent segment are fine. */
    struct entry ok[3] = {E("net/data.pkl", "x"), E("net/code/a..py", "y"), E("net/.x", "z")};
    assert_int_equal(check(ok, 3, 0, why), REMATD_ZIP_OK);
}

static void test_bombs(void **state)
{
    char why[256] = "";
    /* Total: one entry claiming 8 GiB (a Zip64 size) against a 1 MiB limit. */
    struct entry huge[] = {
        E("net/data.pkl", "x"), E("net/code/a.py", "y"), {"net/data/0", "abc", 8, 8ull << 30, -1}};
    assert_int_equal(check(huge, 3, 1, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "more than 1048576 bytes"));
    /* Ratio alone: 100 KiB from 40 bytes, under the 1 MiB total. */
    struct entry ratio[] = {
        E("net/data.pkl", "x"),
        E("net/code/a.py", "y"),
        {"net/data/0", "0123456789abcdefghij0123456789abcdefghij", 8, 100 << 10, -1}};
    assert_int_equal(check(ratio, 3, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "ratio"));
    /* A small entry compressed far is harmless: under the ratio floor. */
    struct entry small[] = {
        E("net/data.pkl", "x"), E("net/code/a.py", "y"), {"net/data/0", "abcd", 8, 60 << 10, -1}};
    assert_int_equal(check(small, 3, 0, why), REMATD_ZIP_OK);
    /* Overlap: the third entry's header is the second's. */
    struct entry over[] = {
        E("net/data.pkl", "x"), E("net/code/a.py", "y"), {"net/code/b.py", "y", 0, 0, 1}};
    assert_int_equal(check(over, 3, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "overlap"));
}

static void test_too_many(void **state)
{
    char why[256] = "";
    static char names[20][32];
    struct entry e[20];
    for (int i = 0; i < 20; i++) {
        snprintf(names[i], sizeof names[i], i == 0 ? "net/data.pkl" : "net/code/%d.py", i);
        e[i] = (struct entry)E(names[i], "x");
    }
    assert_int_equal(check(e, 16, 0, why), REMATD_ZIP_OK);
    assert_int_equal(check(e, 17, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "17 entries"));
}

/* The reason must be text a JSON string can carry. */
static void assert_text(const char *why)
{
    json_t *j = json_string(why);
    assert_non_null(j);
    json_decref(j);
}

static void test_duplicates(void **state)
{
    char why[256] = "";
    /* The same name twice, apart or side by side, is refused and named. */
    const struct entry twice[] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"),
                                  E("net/data/0", "z"), E("net/code/a.py", "w")};
    assert_int_equal(check(twice, 4, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "entries 1 and 3 are both named 'net/code/a.py'"));
    const struct entry pkl[] = {E("net/data.pkl", "x"), E("net/data.pkl", "x"),
                                E("net/code/a.py", "y")};
    assert_int_equal(check(pkl, 3, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "net/data.pkl"));
    /* Names that share a prefix, or differ only in case, are two names. */
    const struct entry near[] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"),
                                 E("net/code/a.pyc", "z"), E("net/code/A.py", "w")};
    assert_int_equal(check(near, 4, 0, why), REMATD_ZIP_OK);
}

static void test_names_utf8(void **state)
{
    char why[256] = "";
    const char *bad[] = {
        "net/code/\xff.py",              /* never in UTF-8 */
        "net/code/\xc0\xaf.py",          /* an overlong '/' */
        "net/code/\xe0\x80\xaf",         /* an overlong '/' in three bytes */
        "net/code/\xed\xa0\x80",         /* a surrogate */
        "net/code/\xf4\x90\x80\x80",     /* past U+10FFFF */
        "net/code/\xe2\x82",             /* cut short at the end */
        "net/code/\xe2\x82.py",          /* cut short inside */
        "net/code/\x80.py",              /* a continuation byte alone */
        "net/code/\xf8\x88\x80\x80\x80", /* a five-byte form */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct entry e[3] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"), E(bad[i], "z")};
        assert_int_equal(check(e, 3, 0, why), REMATD_ZIP_UNSAFE);
        assert_non_null(strstr(why, "entry 2's name is not UTF-8"));
        assert_text(why);
    }
    /* Control characters: a newline would cut a reason in two. */
    const char *ctl[] = {"net/code/a\n.py", "net/code/\x1b[2J.py", "net/code/a\x7f.py",
                         "net/code/\t.py"};
    for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
        struct entry e[3] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"), E(ctl[i], "z")};
        assert_int_equal(check(e, 3, 0, why), REMATD_ZIP_UNSAFE);
        assert_non_null(strstr(why, "entry 2's name has a control character"));
        assert_null(strchr(why, '\n'));
    }
    /* Two-, three- and four-byte characters are names like any other. */
    struct entry ok[4] = {E("net/data.pkl", "x"), E("net/code/caf\xc3\xa9.py", "y"),
                          E("net/data/\xe2\x82\xac", "z"), E("net/data/\xf0\x9f\x98\x80", "w")};
    assert_int_equal(check(ok, 4, 0, why), REMATD_ZIP_OK);
    /* A reason shows at most 100 bytes of a name, and never half a
     * character: a climbing name of two-byte characters, cut inside one. */
    char name[200] = "net/x";
    for (int k = 0; k < 60; k++)
        strcat(name, "\xc3\xa9");
    strcat(name, "/../../x");
    struct entry climb[3] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"), E(name, "z")};
    assert_int_equal(check(climb, 3, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "outside"));
    assert_text(why);
    struct entry dup[4] = {E("net/data.pkl", "x"), E("net/code/a.py", "y"), E(name + 0, "z"),
                           E(name, "w")};
    memcpy(name + strlen(name) - 8, "/abc.pyx", 8); /* no longer climbs */
    assert_int_equal(check(dup, 4, 0, why), REMATD_ZIP_UNSAFE);
    assert_non_null(strstr(why, "both named"));
    assert_text(why);
}

static void test_unreadable(void **state)
{
    char why[256] = "";
    assert_int_equal(rematd_zipcheck_fd(-1, 100, &LIM, NULL, why, sizeof why), REMATD_ZIP_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),       cmocka_unit_test(test_not_zip),
        cmocka_unit_test(test_truncated),  cmocka_unit_test(test_not_torchscript),
        cmocka_unit_test(test_traversal),  cmocka_unit_test(test_bombs),
        cmocka_unit_test(test_too_many),   cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_names_utf8), cmocka_unit_test(test_unreadable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
