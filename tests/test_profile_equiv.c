/* test_profile_equiv.c - the streaming reader (remat_profile_parse) against
 * the jansson path (json_loadb, then remat_profile_from_json) on thousands
 * of generated profiles: random integers and reals in every form JSON
 * allows and some it does not (zero, 2^60 and 2^60+1, 2^63-1 and past it,
 * negatives, leading zeros, exponents, reals for byte fields), random
 * spacing, keys in random or repeated orders, escaped and unknown keys,
 * escapes in names, and now and then a cut or a changed byte.  The reader
 * keeps shortcuts for the usual shapes of these (numbers, keys in the order
 * of the stage before); each must give what the general path gives.  Both
 * must agree exactly: the same profile (times bit for bit), or the same
 * error code and JSON pointer, and for errors past the syntax the same
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"

/* A growable text. */
struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->len + n + 1)
            cap *= 2;
        t->s = realloc(t->s, cap);
        assert_non_null(t->s);
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

static uint64_t below(struct randchain_rng *rng, uint64_t n)
{
    return randchain_below(rng, n);
}

/* Whitespace between tokens: mostly none, as printers write it. */
static void ws(struct text *t, struct randchain_rng *rng)
{
    static const char *const spaces[] = {" ", "\n", "\t", "\r\n", "  ", " \t "};
    if (below(rng, 5) == 0)
        puts_(t, spaces[below(rng, 6)]);
}

/* A valid value for field f (a byte count, saved_bytes above every
 * out_bytes, or a time), in the forms printers write. */
static void clean_number(struct text *t, struct randchain_rng *rng, int f)
{
    char buf[64];
    if (f == 5 || f == 6) {
        static const char *const forms[] = {"%.17g", "%.3f", "%g", "%.1e", "%.6E", "%.1f"};
        double x = (double)(randchain_next(rng) >> 11) / (double)(1ULL << below(rng, 60));
        if (below(rng, 2) == 0)
            snprintf(buf, sizeof buf, "%d.%d", (int)below(rng, 3), (int)below(rng, 10));
        else
            snprintf(buf, sizeof buf, forms[below(rng, 6)], x);
    } else if (f == 1) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)(1000 + below(rng, 1ULL << 50)));
    } else if (below(rng, 4) == 0) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)below(rng, 3));
    } else {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)below(rng, 1000));
    }
    puts_(t, buf);
}

/* A number in one of the forms that matter to the readers. */
static void number(struct text *t, struct randchain_rng *rng, int byte_field)
{
    static const char *const fixed[] = {
        "0",
        "1",
        "-1",
        "-0",
        "00",
        "007",
        "1152921504606846976",  /* 2^60 */
        "1152921504606846977",  /* 2^60 + 1 */
        "1152921504606846975",  /* 2^60 - 1 */
        "9223372036854775807",  /* 2^63 - 1 */
        "9223372036854775808",  /* 2^63 */
        "-9223372036854775808", /* -2^63 */
        "-9223372036854775809",
        "99999999999999999999",
        "999999999999999999", /* 18 digits */
        "1000000000000000000",
        "123456789012345678",
        "1e3",
        "1E+2",
        "2e-1",
        "1.5",
        "2.0",
        "0.0",
        "0.000",
        "0.05",
        "-0.0",
        "1.25e2",
        "3.",
        ".5",
        "1.e5",
        "1e",
        "-",
        "0x10",
        "1.2.3",
        "123456789012345.6",
        "1234567890123456.7",
        "0.1234567890123456789",
        "0.00000000000000000000001",
        "1.7976931348623157e308",
        "1e400",
        "4.9e-324",
        "true",
        "null",
        "\"5\"",
        "[1]",
        "{}",
    };
    char buf[64];
    switch (below(rng, 6)) {
    case 0:
        puts_(t, fixed[below(rng, sizeof fixed / sizeof fixed[0])]);
        return;
    case 1: /* a byte count as profiles hold them */
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)(below(rng, 50) * 3211264));
        break;
    case 2: { /* any integer of up to 20 digits, now and then negative */
        uint64_t v = randchain_next(rng) >> below(rng, 64);
        snprintf(buf, sizeof buf, "%s%llu", below(rng, 8) == 0 ? "-" : "", (unsigned long long)v);
        break;
    }
    case 3: { /* a short decimal: digits '.' digits */
        int ip = (int)below(rng, 4), fp = 1 + (int)below(rng, 18);
        size_t n = 0;
        if (ip == 0)
            buf[n++] = '0';
        for (int k = 0; k < ip; k++)
            buf[n++] = (char)((k == 0 ? '1' + below(rng, 9) : '0' + below(rng, 10)));
        buf[n++] = '.';
        for (int k = 0; k < fp; k++)
            buf[n++] = (char)('0' + (below(rng, 3) == 0 ? 0 : below(rng, 10)));
        buf[n] = '\0';
        break;
    }
    case 4: { /* a real as printers write it */
        static const char *const forms[] = {"%.17g", "%.3f", "%g", "%.1e", "%.6E", "%.1f"};
        double x = (double)(randchain_next(rng) >> 11) / (double)(1ULL << below(rng, 60));
        snprintf(buf, sizeof buf, forms[below(rng, 6)], x);
        break;
    }
    default: /* a small integer, or the time shapes of api/bench-http.sh */
        if (byte_field)
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)below(rng, 1000));
        else
            snprintf(buf, sizeof buf, "%d.%d", (int)below(rng, 3), (int)below(rng, 10));
        break;
    }
    puts_(t, buf);
}

/* Indices 5 and 6 are the times, 7 the name; the block fields come last so
 * that the indices of the others stay what they were. */
static const char *const fields[] = {
    "out_bytes", "saved_bytes", "fwd_tmp_bytes", "bwd_tmp_bytes",      "param_bytes",
    "fwd_ms",    "bwd_ms",      "name",          "fwd_grad_tmp_bytes", "bwd_freed_bytes"};
#define N_MEMBERS 10

/* A key: as it is, or now and then escaped, misspelt or unknown. */
static void key(struct text *t, struct randchain_rng *rng, const char *k, int clean)
{
    puts_(t, "\"");
    uint64_t pick = below(rng, 40);
    switch (clean && pick != 0 ? 3 : pick) {
    case 0: { /* the first letter as \u00XX: the same key to both readers */
        char esc[8];
        snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(unsigned char)k[0]);
        puts_(t, esc);
        puts_(t, k + 1);
        break;
    }
    case 1:
        puts_(t, k);
        puts_(t, "x"); /* unknown */
        break;
    case 2:
        put(t, k, strlen(k) - 1); /* unknown, one shorter */
        break;
    default:
        puts_(t, k);
    }
    puts_(t, "\"");
    ws(t, rng);
    puts_(t, ":");
    ws(t, rng);
}

static void name_value(struct text *t, struct randchain_rng *rng, size_t i, int clean)
{
    static const char *const odd[] = {
        "\"\\u0041b\"", "\"a\\nb\"", "\"q\\\"\"", "\"\xc3\xa9\"", "\"\\ud83d\\ude00\"",
        "\"\"",         "null",      "5",         "\"\\u0000\"",  "\"a\\x\""};
    char buf[32];
    if (below(rng, 10) == 0) {
        puts_(t, odd[below(rng, clean ? 7 : sizeof odd / sizeof odd[0])]);
        return;
    }
    snprintf(buf, sizeof buf, "\"layer%zu\"", i + 1);
    puts_(t, buf);
}

/* One stage object; order is the members' order (N_MEMBERS entries).
 * A clean stage has only valid values and no repeated key. */
static void stage(struct text *t, struct randchain_rng *rng, size_t i, const int *order, int clean)
{
    puts_(t, "{");
    ws(t, rng);
    int first = 1;
    for (int m = 0; m < N_MEMBERS; m++) {
        int f = order[m];
        /* out_bytes nearly always, the others often, missing now and then. */
        if (below(rng, f == 0 ? (clean ? 1000000 : 60) : 12) == 0)
            continue;
        for (int rep = !clean && below(rng, 80) == 0 ? 2 : 1; rep > 0; rep--) {
            if (!first) {
                ws(t, rng);
                puts_(t, ",");
                ws(t, rng);
            }
            first = 0;
            key(t, rng, fields[f], clean);
            if (f == 7)
                name_value(t, rng, i, clean);
            else if (clean)
                clean_number(t, rng, f);
            else
                number(t, rng, f < 5 || f > 7);
        }
    }
    if (below(rng, 50) == 0) {
        if (!first)
            puts_(t, ",");
        puts_(t, "\"extra\":{\"a\":[1,2.5,\"x\"]}");
    }
    ws(t, rng);
    puts_(t, "}");
}

static void shuffle(int *a, int n, struct randchain_rng *rng)
{
    for (int k = n - 1; k > 0; k--) {
        int j = (int)below(rng, (uint64_t)k + 1), x = a[k];
        a[k] = a[j];
        a[j] = x;
    }
}

static void profile_text(struct text *t, struct randchain_rng *rng)
{
    int clean = below(rng, 2) == 0;
    t->len = 0;
    puts_(t, "{");
    ws(t, rng);
    if (below(rng, 4) != 0) {
        puts_(t, "\"format\":\"remat.profile/v1\",");
        ws(t, rng);
    }
    puts_(t, "\"input_bytes\":");
    ws(t, rng);
    if (clean)
        clean_number(t, rng, 0);
    else
        number(t, rng, 1);
    ws(t, rng);
    puts_(t, ",\"stages\":[");
    size_t n = below(rng, 8) == 0 ? 40 + below(rng, 40) : 1 + below(rng, 6);
    int order[N_MEMBERS] = {7, 0, 1, 2, 8, 3, 9, 4, 5, 6};
    int same_order = below(rng, 3) != 0; /* the usual case: every stage alike */
    if (below(rng, 2) == 0)
        shuffle(order, N_MEMBERS, rng);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            ws(t, rng);
            puts_(t, ",");
        }
        ws(t, rng);
        if (!same_order)
            shuffle(order, N_MEMBERS, rng);
        if (!clean && below(rng, 200) == 0)
            puts_(t, "7");
        else
            stage(t, rng, i, order, clean);
    }
    ws(t, rng);
    puts_(t, "]");
    if (below(rng, 10) == 0) {
        puts_(t, ",\"batch_size\":");
        if (clean)
            clean_number(t, rng, 0);
        else
            number(t, rng, 1);
    }
    if (below(rng, 10) == 0)
        puts_(t, ",\"model\":\"m\\u0031\"");
    ws(t, rng);
    puts_(t, "}");
    ws(t, rng);
}

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Both readers on the text: 1 if it parsed, 0 if both refused it alike. */
static int agree(const char *text, size_t n, const char *prefix)
{
    struct remat_error ej, ef;
    memset(&ej, 0, sizeof ej);
    memset(&ef, 0, sizeof ef);
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
    struct remat_profile *pj = root != NULL ? remat_profile_from_json(root, prefix, &ej) : NULL;
    json_decref(root);
    struct remat_profile *pf = remat_profile_parse(text, n, prefix, &ef);
    if ((pj == NULL) != (pf == NULL))
        fail_msg("%s: jansson path %s, streaming reader %s (%s) on\n%.*s", prefix,
                 pj ? "parsed" : "failed", pf ? "parsed" : "failed", ef.message, (int)n, text);
    if (pf == NULL) {
        if (root == NULL) {
            /* A syntax error: jansson's words are its own. */
            assert_int_equal(ef.code, REMAT_EINVAL);
            assert_string_equal(ef.pointer, "");
        } else if (ej.code != ef.code || strcmp(ej.pointer, ef.pointer) != 0 ||
                   strcmp(ej.message, ef.message) != 0) {
            fail_msg("jansson path %d at '%s' (%s), streaming reader %d at '%s' (%s) on\n%.*s",
                     ej.code, ej.pointer, ej.message, ef.code, ef.pointer, ef.message, (int)n,
                     text);
        }
        return 0;
    }
    assert_int_equal(pj->n_stages, pf->n_stages);
    assert_int_equal(pj->input_bytes, pf->input_bytes);
    assert_int_equal(pj->batch_size, pf->batch_size);
    assert_true((pj->model == NULL) == (pf->model == NULL));
    if (pj->model != NULL)
        assert_string_equal(pj->model, pf->model);
    for (size_t i = 0; i < pj->n_stages; i++) {
        const struct remat_stage *x = &pj->stages[i], *y = &pf->stages[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->out_bytes, y->out_bytes);
        assert_int_equal(x->saved_bytes, y->saved_bytes);
        assert_int_equal(x->fwd_tmp_bytes, y->fwd_tmp_bytes);
        assert_int_equal(x->fwd_grad_tmp_bytes, y->fwd_grad_tmp_bytes);
        assert_int_equal(x->bwd_tmp_bytes, y->bwd_tmp_bytes);
        assert_int_equal(x->bwd_freed_bytes, y->bwd_freed_bytes);
        assert_int_equal(x->param_bytes, y->param_bytes);
        assert_true(same_double(x->fwd_ms, y->fwd_ms));
        assert_true(same_double(x->bwd_ms, y->bwd_ms));
    }
    remat_profile_free(pj);
    remat_profile_free(pf);
    return 1;
}

static void generated_profiles(void **state)
{
    (void)state;
    struct randchain_rng rng;
    randchain_seed(&rng, 20261123);
    struct text t = {NULL, 0, 0};
    int parsed = 0, refused = 0, cut = 0;
    for (int k = 0; k < 6000; k++) {
        profile_text(&t, &rng);
        /* Many of them valid: numbers that are fine are the usual case. */
        size_t n = t.len;
        if (below(&rng, 10) == 0) {
            n = below(&rng, t.len + 1); /* cut short */
            cut++;
        } else if (below(&rng, 10) == 0) {
            static const char junk[] = "{}[],:\" 0-.eE\\x\x01\xc3";
            t.s[below(&rng, t.len)] = junk[below(&rng, sizeof junk - 1)];
        }
        int ok = agree(t.s, n, k % 2 ? "/profile" : "");
        parsed += ok;
        refused += !ok;
    }
    free(t.s);
    /* The generator reaches both outcomes, and often. */
    assert_true(parsed > 600);
    assert_true(refused > 600);
    assert_true(cut > 300);
}

/* The bench body itself (api/bench-http.sh's profile): every value as the
 * jansson path reads it. */
static void bench_profile(void **state)
{
    (void)state;
    struct text t = {NULL, 0, 0};
    puts_(&t, "{\"format\":\"remat.profile/v1\",\"input_bytes\":19267584,\"stages\":[");
    for (int i = 1; i <= 50; i++) {
        long long out = (long long)(i % 7 + 1) * 3211264;
        char buf[320];
        snprintf(buf, sizeof buf,
                 "%s{\"name\":\"layer%d\",\"out_bytes\":%lld,\"saved_bytes\":%lld,"
                 "\"fwd_tmp_bytes\":%lld,\"bwd_tmp_bytes\":%lld,\"param_bytes\":%d,"
                 "\"fwd_ms\":%d.%d,\"bwd_ms\":%d.%d}",
                 i > 1 ? "," : "", i, out, out * 2, out / 2, out, (i % 5) * 147456, i % 3, i % 10,
                 i % 4 + 1, i % 7);
        puts_(&t, buf);
    }
    puts_(&t, "]}");
    assert_int_equal(agree(t.s, t.len, "/profile"), 1);
    free(t.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generated_profiles),
        cmocka_unit_test(bench_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
