/* test_profile.c - remat.profile/v1: every bad profile under
 * tests/data/profiles/bad gives the code and JSON pointer its index.txt
 * line says (also under a caller's prefix), good ones parse with the
 * documented defaults, and printing then parsing gives the same profile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"

static char *read_file(const char *rel, size_t *len)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", top != NULL ? top : ".", rel);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *bigger = realloc(buf, cap);
            if (bigger == NULL)
                free(buf);
            assert_non_null(bigger);
            buf = bigger;
        }
        size_t got = fread(buf + *len, 1, 4096, f);
        *len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

/* What remat_profile_loadb did before the streaming reader: jansson's tree,
 * then remat_profile_from_json.  The reader is held to its answers. */
static struct remat_profile *jansson_load(const char *text, size_t n, const char *prefix,
                                          struct remat_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        err->code = REMAT_EINVAL;
        err->pointer[0] = '\0';
        snprintf(err->message, sizeof err->message, "%s", jerr.text);
        return NULL;
    }
    struct remat_profile *p = remat_profile_from_json(root, prefix, err);
    json_decref(root);
    return p;
}

static void assert_same_profile(const struct remat_profile *a, const struct remat_profile *b)
{
    assert_int_equal(a->n_stages, b->n_stages);
    assert_int_equal(a->input_bytes, b->input_bytes);
    assert_int_equal(a->batch_size, b->batch_size);
    const char *const am[] = {a->model, a->dtype, a->device, a->driver, a->libtorch};
    const char *const bm[] = {b->model, b->dtype, b->device, b->driver, b->libtorch};
    for (int k = 0; k < 5; k++) {
        assert_true((am[k] == NULL) == (bm[k] == NULL));
        if (am[k] != NULL)
            assert_string_equal(am[k], bm[k]);
    }
    for (size_t i = 0; i < a->n_stages; i++) {
        const struct remat_stage *x = &a->stages[i], *y = &b->stages[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->out_bytes, y->out_bytes);
        assert_int_equal(x->saved_bytes, y->saved_bytes);
        assert_int_equal(x->fwd_tmp_bytes, y->fwd_tmp_bytes);
        assert_int_equal(x->bwd_tmp_bytes, y->bwd_tmp_bytes);
        assert_int_equal(x->param_bytes, y->param_bytes);
        assert_memory_equal(&x->fwd_ms, &y->fwd_ms, sizeof x->fwd_ms);
        assert_memory_equal(&x->bwd_ms, &y->bwd_ms, sizeof x->bwd_ms);
    }
}

/* Both readers on text under prefix: the same profile, or the same code
 * and pointer.  Returns 1 when the text parsed. */
static int both_agree(const char *what, const char *text, size_t n, const char *prefix)
{
    struct remat_error ej, ef;
    memset(&ej, 0, sizeof ej);
    memset(&ef, 0, sizeof ef);
    struct remat_profile *pj = jansson_load(text, n, prefix, &ej);
    struct remat_profile *pf = remat_profile_parse(text, n, prefix, &ef);
    if ((pj == NULL) != (pf == NULL))
        fail_msg("%s: jansson path %s (%s), streaming reader %s (%s)", what,
                 pj ? "parsed" : "failed", ej.message, pf ? "parsed" : "failed", ef.message);
    if (pj == NULL) {
        if (ej.code != ef.code || strcmp(ej.pointer, ef.pointer) != 0)
            fail_msg("%s: jansson path %d at '%s' (%s), streaming reader %d at '%s' (%s)", what,
                     ej.code, ej.pointer, ej.message, ef.code, ef.pointer, ef.message);
        assert_true(strlen(ef.message) > 0);
        return 0;
    }
    assert_same_profile(pj, pf);
    remat_profile_free(pj);
    remat_profile_free(pf);
    return 1;
}

static int code_of(const char *name)
{
    if (strcmp(name, "EINVAL") == 0)
        return REMAT_EINVAL;
    if (strcmp(name, "ELIMIT") == 0)
        return REMAT_ELIMIT;
    fail_msg("unknown code %s in index.txt", name);
    return 0;
}

static void bad_profiles(void **state)
{
    (void)state;
    size_t len;
    char *index = read_file("tests/data/profiles/bad/index.txt", &len);
    size_t cases = 0;
    for (char *line = strtok(index, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char name[128], code[16], pointer[128];
        assert_int_equal(sscanf(line, "%127s %15s %127s", name, code, pointer), 3);
        if (strcmp(pointer, "-") == 0)
            pointer[0] = '\0';
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/profiles/bad/%s.json", name);
        size_t n;
        char *text = read_file(rel, &n);
        struct remat_error err;
        memset(&err, 0, sizeof err);
        struct remat_profile *p = remat_profile_loadb(text, n, &err);
        if (p != NULL)
            fail_msg("%s: parsed, but should fail", name);
        if (err.code != code_of(code) || strcmp(err.pointer, pointer) != 0)
            fail_msg("%s: got %d at '%s' (%s), want %s at '%s'", name, err.code, err.pointer,
                     err.message, code, pointer);
        assert_true(strlen(err.message) > 0);
        assert_null(strchr(err.message, '\n'));
        /* Both readers, with and without a prefix, agree on code and pointer. */
        assert_int_equal(both_agree(name, text, n, ""), 0);
        assert_int_equal(both_agree(name, text, n, "/profile"), 0);
        /* The same under a caller's prefix, when the text is JSON at all. */
        json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
        if (root != NULL) {
            struct remat_error err2;
            assert_null(remat_profile_from_json(root, "/profile", &err2));
            char want[160];
            snprintf(want, sizeof want, "/profile%s", pointer);
            assert_int_equal(err2.code, err.code);
            assert_string_equal(err2.pointer, want);
            json_decref(root);
        }
        free(text);
        cases++;
    }
    free(index);
    assert_true(cases >= 25);
}

static void defaults(void **state)
{
    (void)state;
    const char *text = "{\"input_bytes\": 7, \"stages\": [{\"name\": \"conv1\", \"out_bytes\": 5},"
                       " {\"out_bytes\": 0}], \"model\": \"vgg19\", \"batch_size\": 64}";
    struct remat_error err;
    struct remat_profile *p = remat_profile_loadb(text, strlen(text), &err);
    assert_non_null(p);
    assert_int_equal(p->n_stages, 2);
    assert_int_equal(p->input_bytes, 7);
    assert_string_equal(p->stages[0].name, "conv1");
    assert_string_equal(p->stages[1].name, "");
    assert_int_equal(p->stages[0].saved_bytes, 5);
    assert_int_equal(p->stages[0].fwd_tmp_bytes, 0);
    assert_int_equal(p->stages[0].bwd_tmp_bytes, 0);
    assert_int_equal(p->stages[0].param_bytes, 0);
    assert_true(p->stages[0].fwd_ms == 1.0);
    assert_true(p->stages[0].bwd_ms == 2.0);
    assert_string_equal(p->model, "vgg19");
    assert_null(p->dtype);
    assert_int_equal(p->batch_size, 64);
    assert_int_equal(remat_profile_validate(p, NULL), 0);
    remat_profile_free(p);
}

/* The block refinements: absent, a profile means what it always did (the
 * forward with grad's transient is fwd_tmp_bytes, nothing freed early), by
 * both readers; present, they are read, printed and read back. */
static void block_fields(void **state)
{
    (void)state;
    const char *v1 = "{\"input_bytes\": 7, \"stages\": [{\"out_bytes\": 5, \"saved_bytes\": 9,"
                     " \"fwd_tmp_bytes\": 11, \"bwd_tmp_bytes\": 3}]}";
    const char *v2 = "{\"input_bytes\": 7, \"stages\": [{\"out_bytes\": 5, \"saved_bytes\": 9,"
                     " \"fwd_tmp_bytes\": 11, \"fwd_grad_tmp_bytes\": 2, \"bwd_tmp_bytes\": 3,"
                     " \"bwd_freed_bytes\": 14}]}";
    const char *texts[2] = {v1, v2};
    const int64_t grad[2] = {11, 2}, freed[2] = {0, 14};
    for (int k = 0; k < 2; k++) {
        struct remat_error err;
        struct remat_profile *p = remat_profile_loadb(texts[k], strlen(texts[k]), &err);
        assert_non_null(p);
        json_error_t je;
        json_t *j = json_loads(texts[k], 0, &je);
        assert_non_null(j);
        struct remat_profile *q = remat_profile_from_json(j, NULL, &err);
        json_decref(j);
        assert_non_null(q);
        j = remat_profile_to_json(p);
        assert_non_null(j);
        struct remat_profile *r = remat_profile_from_json(j, NULL, &err);
        json_decref(j);
        assert_non_null(r);
        const struct remat_profile *all[3] = {p, q, r};
        for (int m = 0; m < 3; m++) {
            assert_int_equal(all[m]->stages[0].fwd_tmp_bytes, 11);
            assert_int_equal(all[m]->stages[0].fwd_grad_tmp_bytes, grad[k]);
            assert_int_equal(all[m]->stages[0].bwd_tmp_bytes, 3);
            assert_int_equal(all[m]->stages[0].bwd_freed_bytes, freed[k]);
            assert_int_equal(remat_profile_validate(all[m], NULL), 0);
        }
        /* Freeing one byte more than x̄ + x (14) is refused by validate too. */
        p->stages[0].bwd_freed_bytes = 15;
        assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
        assert_string_equal(err.pointer, "/stages/0/bwd_freed_bytes");
        remat_profile_free(r);
        remat_profile_free(q);
        remat_profile_free(p);
    }
}

static void round_trip(void **state)
{
    (void)state;
    size_t n;
    char *text = read_file("tests/data/profiles/good/full.json", &n);
    struct remat_error err;
    struct remat_profile *p = remat_profile_loadb(text, n, &err);
    if (p == NULL)
        fail_msg("full.json: %s: %s", err.pointer, err.message);
    json_t *j = remat_profile_to_json(p);
    assert_non_null(j);
    struct remat_profile *q = remat_profile_from_json(j, NULL, &err);
    assert_non_null(q);
    assert_int_equal(q->n_stages, p->n_stages);
    assert_int_equal(q->input_bytes, p->input_bytes);
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *a = &p->stages[i], *b = &q->stages[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->out_bytes, b->out_bytes);
        assert_int_equal(a->saved_bytes, b->saved_bytes);
        assert_int_equal(a->fwd_tmp_bytes, b->fwd_tmp_bytes);
        assert_int_equal(a->fwd_grad_tmp_bytes, b->fwd_grad_tmp_bytes);
        assert_int_equal(a->bwd_tmp_bytes, b->bwd_tmp_bytes);
        assert_int_equal(a->bwd_freed_bytes, b->bwd_freed_bytes);
        assert_int_equal(a->param_bytes, b->param_bytes);
        assert_true(a->fwd_ms == b->fwd_ms);
        assert_true(a->bwd_ms == b->bwd_ms);
    }
    assert_string_equal(q->model, p->model);
    assert_string_equal(q->dtype, p->dtype);
    assert_string_equal(q->device, p->device);
    assert_int_equal(q->batch_size, p->batch_size);
    json_decref(j);
    remat_profile_free(q);
    remat_profile_free(p);
    free(text);
}

/* Random profiles survive printing to text and parsing back, every field
 * exact (times are printed with enough digits to round-trip). */
static void random_round_trip(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct remat_profile *p =
            randchain_profile(seed, 1 + seed * 3, (enum randchain_dist)(seed % 4), 1);
        assert_non_null(p);
        p->stages[0].fwd_ms = 0.1 * (double)seed; /* not a multiple of 1/4 */
        json_t *j = remat_profile_to_json(p);
        assert_non_null(j);
        char *text = json_dumps(j, JSON_COMPACT);
        assert_non_null(text);
        struct remat_error err;
        struct remat_profile *q = remat_profile_loadb(text, strlen(text), &err);
        assert_non_null(q);
        struct remat_profile *qj = jansson_load(text, strlen(text), NULL, &err);
        assert_non_null(qj);
        assert_same_profile(q, qj);
        remat_profile_free(qj);
        assert_int_equal(q->n_stages, p->n_stages);
        assert_int_equal(q->input_bytes, p->input_bytes);
        assert_int_equal(memcmp(&q->stages[0].out_bytes, &p->stages[0].out_bytes,
                                sizeof p->stages[0] - offsetof(struct remat_stage, out_bytes)),
                         0);
        for (size_t i = 1; i < p->n_stages; i++) {
            assert_int_equal(q->stages[i].out_bytes, p->stages[i].out_bytes);
            assert_int_equal(q->stages[i].saved_bytes, p->stages[i].saved_bytes);
            assert_int_equal(q->stages[i].fwd_tmp_bytes, p->stages[i].fwd_tmp_bytes);
            assert_int_equal(q->stages[i].bwd_tmp_bytes, p->stages[i].bwd_tmp_bytes);
            assert_int_equal(q->stages[i].param_bytes, p->stages[i].param_bytes);
            assert_true(q->stages[i].fwd_ms == p->stages[i].fwd_ms);
            assert_true(q->stages[i].bwd_ms == p->stages[i].bwd_ms);
        }
        free(text);
        json_decref(j);
        remat_profile_free(q);
        remat_profile_free(p);
    }
}

/* Text the bad/ files do not reach: JSON syntax at its edges, errors in
 * several places at once (the first in the jansson path's order must win
 * whatever the order of the text), and odd but valid input. */
static void streaming_matches_jansson(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "",
        " ",
        "5",
        "\"x\"",
        "null",
        "[]",
        "[1,2]",
        "{}",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]} ",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]} x",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}{}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1},]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}],}",
        "{\"input_bytes\":01,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":-0,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1.,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":.5}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":1e}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":1e-400}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":1e400}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":-0.0}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":NaN}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":Infinity}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":12345678901234567890}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":9223372036854775807}]}",
        "{\"input_bytes\":-9223372036854775808,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":-9223372036854775809,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1152921504606846977,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":0."
        "1000000000000000055511151231257827021181583404541015625}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":5}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":true}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"bwd_ms\":null}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"out_bytes\":2}]}",
        "{\"input_bytes\":1,\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"x\":1,\"x\":2,\"stages\":[{\"out_bytes\":1}]}",
        /* Empty keys: the reader's key store is still empty (NULL) when
         * the second is compared (fuzz_profile found NULL + 0 there). */
        "{\"\":1,\"\":1,\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"\":1,\"\":2,\"out_bytes\":1}]}",
        "{\"\":1,\"input_bytes\":1,\"stages\":[{\"\":1,\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"x\":1,\"\\u0078\":2,\"stages\":[{\"out_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"y\":{\"a\":1,\"a\":1}}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"y\":{\"a\":1},\"z\":{\"a\":1}}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"y\":1,\"y\":1}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"o\\u0075t_bytes\":1}]}",
        "{\"input_bytes\":1,\"stages\":[[{\"a\":1,\"a\":2}]]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"a\\u0000b\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\\ud800\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\\udc00\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\\ud83d\\ude00 "
        "\\u00e9\\n\\t\\\"\\\\\\/\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\\x\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\\u12\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"tab\there\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":"
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\xc3\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\xc0\xaf\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\xed\xa0\x80\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\xf4\x90\x80\x80\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\xff\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":null}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"\"}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"name\":\"unterminated",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}], \"model\":null, "
        "\"dtype\":\"f\\u0031\"}",
        "{\"format\":\"remat.profile/v1\",\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"format\":\"remat.profile\\/v1\",\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"format\":\"remat.profile/v2\",\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"format\":null,\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]}",
        "{\"stages\":[{\"out_bytes\":-1}],\"format\":7}",
        "{\"stages\":[{\"out_bytes\":-1}],\"input_bytes\":\"1\"}",
        "{\"stages\":[{\"out_bytes\":-1},5],\"input_bytes\":1}",
        "{\"stages\":[{\"out_bytes\":-1},{\"name\":7}],\"input_bytes\":1}",
        "{\"stages\":[{\"out_bytes\":1,\"saved_bytes\":0,\"fwd_ms\":-1}],\"input_bytes\":1}",
        "{\"stages\":[{\"bwd_ms\":-1,\"out_bytes\":1,\"saved_bytes\":0}],\"input_bytes\":1}",
        "{\"stages\":[{\"out_bytes\":1,\"saved_bytes\":0}],\"input_bytes\":1,\"model\":5}",
        "{\"stages\":[{\"out_bytes\":1}],\"input_bytes\":1,\"model\":5,\"batch_size\":-1}",
        "{\"stages\":[{\"out_bytes\":1}],\"input_bytes\":1,\"batch_size\":-1,\"model\":5}",
        "{\"stages\":[{\"out_bytes\":1}],\"input_bytes\":1,\"batch_size\":2.0}",
        "{\"stages\":[{\"out_bytes\":1}],\"input_bytes\":1,\"batch_size\":null}",
        "{\"stages\":[{\"out_bytes\":1}],\"input_bytes\":1,\"batch_size\":0}",
        "{\"stages\":[{\"out_bytes\":1152921504606846976},{\"out_bytes\":1}],\"input_bytes\":1,"
        "\"batch_size\":-1}",
        "{\"stages\":[{\"out_bytes\":1152921504606846976},{\"out_bytes\":1}],\"input_bytes\":1}",
        "{\"stages\":{},\"input_bytes\":1}",
        "{\"stages\":[],\"input_bytes\":-1}",
        "{\"stages\":[1,2,{\"name\":5}],\"input_bytes\":1}",
        "{\"stages\":[{\"out_bytes\":1,\"name\":5},[]],\"input_bytes\":1}",
        " \t\r\n{\"stages\" : [ { \"out_bytes\" : 1 } ] , \"input_bytes\" : 1 } \n",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}],\"extra\":[true,false,null,{\"k\":[]}]}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}],\"extra\":tru}",
        "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}],\"extra\":nul}",
    };
    size_t ncases = sizeof cases / sizeof cases[0];
    int parsed = 0;
    for (size_t k = 0; k < ncases; k++) {
        char what[32];
        snprintf(what, sizeof what, "case %zu", k);
        parsed += both_agree(what, cases[k], strlen(cases[k]), "");
        both_agree(what, cases[k], strlen(cases[k]), "/profile");
    }
    assert_true(parsed >= 10 && (size_t)parsed < ncases - 40);
    /* Text that does not end in a NUL: the number and the literal at the
     * very end of the buffer, read from a copy without a terminator. */
    const char *t = "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":2.5}]}";
    size_t n = strlen(t);
    char *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, t, n);
    for (size_t cut = 0; cut <= n; cut++)
        both_agree("a prefix of the text", copy, cut, "");
    free(copy);
    /* Times in the forms people and printers write them: the reader's
     * shortcut for short decimals must give strtod's double exactly. */
    struct randchain_rng rng;
    randchain_seed(&rng, 7);
    static const char *const forms[] = {"%.17g", "%.3f", "%.15g", "%g", "%.1e", "%.20f", "%.6E"};
    for (int k = 0; k < 3000; k++) {
        uint64_t bits = randchain_next(&rng);
        double x = (double)(bits >> 11) / (double)(1ULL << (bits % 60));
        if (k % 3 == 0)
            x = (double)(bits % 100000) / 1000.0;
        char num[400], text[512];
        snprintf(num, sizeof num, forms[k % 7], x);
        snprintf(text, sizeof text,
                 "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,\"fwd_ms\":%s}]}", num);
        /* Past REMAT_MAX_MS both refuse it, at the same pointer. */
        assert_int_equal(both_agree(num, text, strlen(text), ""),
                         strtod(num, NULL) <= REMAT_MAX_MS);
    }
    /* A profile followed by more text (the rest of a request): read up
     * to its end and the whitespace after it, and no further. */
    const char *req = "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}]} \n,\"algorithm\":\"x\"}";
    size_t used = 0;
    int req_depth = 0;
    struct remat_profile *q =
        remat__profile_parse(req, strlen(req), "/profile", NULL, &req_depth, &used, NULL);
    assert_non_null(q);
    assert_int_equal(used, strlen(req) - strlen(",\"algorithm\":\"x\"}"));
    assert_int_equal(req_depth, 4);
    remat_profile_free(q);
    assert_null(remat_profile_parse(req, strlen(req), "/profile", NULL));
    /* Nesting: jansson allows 2048 values deep. */
    for (int depth = 2046; depth <= 2050; depth++) {
        size_t cap = 64 + 2 * (size_t)depth;
        char *deep = malloc(cap);
        assert_non_null(deep);
        int m = snprintf(deep, cap, "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1}],\"x\":");
        for (int d = 0; d < depth - 2; d++)
            deep[m++] = '[';
        deep[m++] = '1';
        for (int d = 0; d < depth - 2; d++)
            deep[m++] = ']';
        deep[m++] = '}';
        both_agree("deep nesting", deep, (size_t)m, "");
        free(deep);
    }
}

/* The stage count is checked before anything is allocated for the stages;
 * the array holds one shared object, so the test itself stays small. */
static void stage_limit(void **state)
{
    (void)state;
    json_t *stage = json_pack("{s:s, s:i}", "name", "relu", "out_bytes", 3);
    json_t *stages = json_array();
    for (size_t i = 0; i < REMAT_MAX_STAGES; i++)
        assert_int_equal(json_array_append(stages, stage), 0);
    json_t *root = json_pack("{s:i, s:O}", "input_bytes", 3, "stages", stages);
    assert_non_null(root);
    struct remat_error err;
    struct remat_profile *p = remat_profile_from_json(root, "", &err);
    assert_non_null(p); /* exactly the limit is fine, names in one arena */
    assert_int_equal(p->n_stages, REMAT_MAX_STAGES);
    assert_string_equal(p->stages[REMAT_MAX_STAGES - 1].name, "relu");
    remat_profile_free(p);
    assert_int_equal(json_array_append(stages, stage), 0);
    assert_null(remat_profile_from_json(root, "/profile", &err));
    assert_int_equal(err.code, REMAT_ELIMIT);
    assert_string_equal(err.pointer, "/profile/stages");
    json_decref(root);
    json_decref(stages);
    json_decref(stage);
}

/* validate() checks what the parser checks, for profiles filled by hand. */
static void validate_by_hand(void **state)
{
    (void)state;
    struct remat_error err;
    assert_null(remat_profile_new(0, &err));
    assert_int_equal(err.code, REMAT_EINVAL);
    assert_null(remat_profile_new(REMAT_MAX_STAGES + 1, &err));
    assert_int_equal(err.code, REMAT_ELIMIT);
    struct remat_profile *p = remat_profile_new(3, &err);
    assert_non_null(p);
    assert_int_equal(remat_profile_validate(p, &err), 0);
    p->stages[1].out_bytes = 5; /* saved_bytes is still 0 */
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/stages/1/saved_bytes");
    p->stages[1].saved_bytes = 5;
    p->stages[2].bwd_ms = -1;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/stages/2/bwd_ms");
    p->stages[2].bwd_ms = 1.0 / 0.0;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    p->stages[2].bwd_ms = 2;
    p->stages[0].param_bytes = REMAT_MAX_BYTES + 1;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_ELIMIT);
    assert_string_equal(err.pointer, "/stages/0/param_bytes");
    /* The parser's message for the same value: one set of rules. */
    struct remat_error perr;
    const char *over = "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1,"
                       "\"param_bytes\":1152921504606846977}]}";
    assert_null(remat_profile_parse(over, strlen(over), "", &perr));
    assert_string_equal(perr.pointer, err.pointer);
    assert_string_equal(perr.message, err.message);
    p->stages[2].fwd_ms = -0.5;
    p->stages[0].param_bytes = 0;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    const char *neg = "{\"input_bytes\":1,\"stages\":[{\"out_bytes\":1},{\"out_bytes\":1},"
                      "{\"out_bytes\":1,\"fwd_ms\":-0.5}]}";
    assert_null(remat_profile_parse(neg, strlen(neg), "", &perr));
    assert_string_equal(perr.pointer, err.pointer);
    assert_string_equal(perr.message, err.message);
    p->stages[2].fwd_ms = 1;
    p->stages[0].param_bytes = REMAT_MAX_BYTES + 1;
    p->stages[0].param_bytes = REMAT_MAX_BYTES / 2;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_ELIMIT);
    assert_string_equal(err.pointer, "/stages");
    p->stages[0].param_bytes = 0;
    p->input_bytes = -1;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/input_bytes");
    p->input_bytes = 1;
    /* remat_solve refuses what validate refuses. */
    p->stages[0].fwd_tmp_bytes = -3;
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_STORE_ALL;
    struct remat_plan plan;
    assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/stages/0/fwd_tmp_bytes");
    remat_profile_free(p);
    remat_profile_free(NULL);
}

/* A C program that builds a profile with remat_profile_new and fills in
 * fwd_tmp_bytes alone (it predates fwd_grad_tmp_bytes) gets the plans and
 * peaks a JSON reader gives the same stages without fwd_grad_tmp_bytes:
 * the forward with grad's transient is fwd_tmp_bytes, not 0. */
static void c_api_fwd_grad_default(void **state)
{
    (void)state;
    enum { N = 7 };
    /* out, saved, fwd_tmp, bwd_tmp, param: the forward transients are
     * large enough that F_all's is the peak of store-all. */
    static const int64_t v[N][5] = {
        {40, 90, 900, 30, 8}, {60, 60, 50, 20, 0}, {20, 70, 700, 90, 16}, {80, 120, 30, 10, 4},
        {30, 30, 600, 40, 0}, {50, 90, 10, 60, 2}, {10, 10, 400, 5, 1}};
    struct remat_error err;
    struct remat_profile *c = remat_profile_new(N, &err);
    assert_non_null(c);
    c->input_bytes = 25;
    char text[2048];
    size_t len = (size_t)snprintf(text, sizeof text, "{\"input_bytes\": 25, \"stages\": [");
    for (size_t i = 0; i < N; i++) {
        struct remat_stage *s = &c->stages[i];
        s->out_bytes = v[i][0];
        s->saved_bytes = v[i][1];
        s->fwd_tmp_bytes = v[i][2];
        s->bwd_tmp_bytes = v[i][3];
        s->param_bytes = v[i][4];
        s->fwd_ms = (double)(i + 1);
        s->bwd_ms = (double)(2 * i + 1);
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "%s{\"out_bytes\": %lld, \"saved_bytes\": %lld, \"fwd_tmp_bytes\": "
                                "%lld, \"bwd_tmp_bytes\": %lld, \"param_bytes\": %lld, \"fwd_ms\": "
                                "%zu, \"bwd_ms\": %zu}",
                                i > 0 ? ", " : "", (long long)v[i][0], (long long)v[i][1],
                                (long long)v[i][2], (long long)v[i][3], (long long)v[i][4], i + 1,
                                2 * i + 1);
        assert_true(len < sizeof text);
    }
    len += (size_t)snprintf(text + len, sizeof text - len, "]}");
    assert_true(len < sizeof text);
    struct remat_profile *j = remat_profile_loadb(text, len, &err);
    assert_non_null(j);
    assert_int_equal(remat_profile_validate(c, &err), REMAT_OK);

    /* The field says "the same as fwd_tmp_bytes", and reads as that. */
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(c->stages[i].fwd_grad_tmp_bytes, REMAT_SAME_AS_FWD_TMP);
        assert_int_equal(remat_stage_fwd_grad_tmp_bytes(&c->stages[i]), v[i][2]);
        assert_int_equal(j->stages[i].fwd_grad_tmp_bytes, v[i][2]);
    }

    /* Every solver's plan and peak, the same from both. */
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_STORE_ALL;
    struct remat_plan pc, pj;
    assert_int_equal(remat_solve(j, &o, &pj, &err), REMAT_OK);
    int64_t store_all = pj.peak_bytes;
    remat_plan_clear(&pj);
    for (int a = 0; a < REMAT_ALG_COUNT; a++) {
        o.algorithm = (enum remat_algorithm)a;
        o.segments = 3;
        o.budget_bytes = store_all;
        assert_int_equal(remat_solve(c, &o, &pc, &err), REMAT_OK);
        assert_int_equal(remat_solve(j, &o, &pj, &err), REMAT_OK);
        assert_int_equal(pc.peak_bytes, pj.peak_bytes);
        assert_int_equal(pc.objective_value, pj.objective_value);
        assert_true(pc.total_ms == pj.total_ms);
        assert_int_equal(pc.schedule.n_ops, pj.schedule.n_ops);
        assert_int_equal(pc.n_checkpoints, pj.n_checkpoints);
        for (size_t k = 0; k < pc.n_checkpoints; k++)
            assert_int_equal(pc.checkpoints[k], pj.checkpoints[k]);
        remat_plan_clear(&pc);
        remat_plan_clear(&pj);
    }

    /* The frontier too. */
    struct remat_frontier fc, fj;
    assert_int_equal(remat_frontier_compute(c, 0, &fc, &err), REMAT_OK);
    assert_int_equal(remat_frontier_compute(j, 0, &fj, &err), REMAT_OK);
    assert_int_equal(fc.n_points, fj.n_points);
    for (size_t k = 0; k < fc.n_points; k++)
        assert_int_equal(fc.points[k].peak_bytes, fj.points[k].peak_bytes);
    remat_frontier_clear(&fc);
    remat_frontier_clear(&fj);

    /* Printed, it is the value it stands for: the text reads back equal. */
    json_t *printed = remat_profile_to_json(c);
    assert_non_null(printed);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(
            json_integer_value(json_object_get(
                json_array_get(json_object_get(printed, "stages"), i), "fwd_grad_tmp_bytes")),
            v[i][2]);
    json_decref(printed);

    /* The old default, 0, would have predicted less: the test can tell. */
    o.algorithm = REMAT_ALG_STORE_ALL;
    for (size_t i = 0; i < N; i++)
        c->stages[i].fwd_grad_tmp_bytes = 0;
    assert_int_equal(remat_solve(c, &o, &pc, &err), REMAT_OK);
    assert_true(pc.peak_bytes < store_all);
    remat_plan_clear(&pc);

    /* Any other negative value is refused, naming the field. */
    c->stages[3].fwd_grad_tmp_bytes = -2;
    assert_int_equal(remat_profile_validate(c, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/stages/3/fwd_grad_tmp_bytes");
    remat_profile_free(j);
    remat_profile_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_profiles),           cmocka_unit_test(defaults),
        cmocka_unit_test(block_fields),           cmocka_unit_test(round_trip),
        cmocka_unit_test(random_round_trip),      cmocka_unit_test(stage_limit),
        cmocka_unit_test(validate_by_hand),       cmocka_unit_test(streaming_matches_jansson),
        cmocka_unit_test(c_api_fwd_grad_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
