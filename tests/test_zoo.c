/* test_zoo - the model zoo of src/rematx/zoo.h: every zoo model's layer list
 * byte for byte as the worker's own C++ zoo wrote it before the zoo moved
 * into rematx (tests/data/zoo/, made once by that code; VGG's since without
 * the two stray dropouts of its features, docs/worker.md), GET /v1/models
 * byte for byte as rematd answered it then, the checks of model_options,
 * the default input shapes, and out-of-memory at every allocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "rematx/rematx.h"

/* The whole file, NUL-terminated (new), or a test failure. */
static char *read_data(const char *name)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/zoo/%s", top ? top : ".", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    char *text = malloc(1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

/* The value's compact text and a newline, as the data files hold it. */
static void assert_dumps_as(json_t *v, const char *file)
{
    assert_non_null(v);
    char *got = json_dumps(v, JSON_COMPACT);
    assert_non_null(got);
    char *want = read_data(file);
    size_t n = strlen(got), at = 0;
    while (at < n && got[at] == want[at])
        at++;
    if (at < n || strcmp(want + n, "\n") != 0)
        fail_msg("%s differs at byte %zu:\n got ...%.80s\nwant ...%.80s", file, at,
                 got + (at > 40 ? at - 40 : 0), want + (at > 40 ? at - 40 : 0));
    free(got);
    free(want);
}

static json_t *layers_of(const char *model, const char *options_text)
{
    const struct rematx_zoo_model *m = rematx_zoo_find(model);
    assert_non_null(m);
    json_t *opts = options_text ? json_loads(options_text, 0, NULL) : NULL;
    json_int_t values[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err = {0};
    assert_int_equal(rematx_zoo_options(m, opts, values, &err), REMAT_OK);
    json_decref(opts);
    return rematx_zoo_layers(m, values);
}

static void layer_lists_as_before(void **state)
{
    static const char *const models[] = {"alexnet",  "vgg11",     "vgg16",     "vgg19", "resnet18",
                                         "resnet50", "resnet101", "resnet152", "gpt"};
    assert_int_equal(rematx_zoo_count(), sizeof models / sizeof models[0]);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.json", models[i]);
        json_t *ls = layers_of(models[i], NULL);
        assert_dumps_as(ls, file);
        json_decref(ls);
        /* Each zoo model is listed in that order too. */
        assert_string_equal(rematx_zoo_at(i)->name, models[i]);
    }
    json_t *ls = layers_of("gpt", "{\"d_model\":64,\"heads\":4,\"layers\":3,\"vocab\":1000,"
                                  "\"seq_len\":16}");
    assert_dumps_as(ls, "gpt-small.json");
    json_decref(ls);
    ls = layers_of("gpt", "{\"layers\":1}");
    assert_dumps_as(ls, "gpt-1-layer.json");
    json_decref(ls);
}

static void models_list_as_before(void **state)
{
    json_t *list = rematx_zoo_list_json();
    assert_dumps_as(list, "models.json");
    json_decref(list);
}

static void find(void **state)
{
    assert_null(rematx_zoo_find("resnet9000"));
    assert_null(rematx_zoo_find(""));
    assert_null(rematx_zoo_find(NULL));
    assert_null(rematx_zoo_at(rematx_zoo_count()));
    for (size_t i = 0; i < rematx_zoo_count(); i++)
        assert_ptr_equal(rematx_zoo_find(rematx_zoo_at(i)->name), rematx_zoo_at(i));
}

/* rematx_zoo_options on text (NULL: absent); returns its code, fills err. */
static int check(const char *model, const char *text, json_int_t *values, struct remat_error *err)
{
    json_t *opts = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    if (text)
        assert_non_null(opts);
    memset(err, 0, sizeof *err);
    int rc = rematx_zoo_options(model ? rematx_zoo_find(model) : NULL, opts, values, err);
    json_decref(opts);
    return rc;
}

static void expect_invalid(const char *model, const char *text, const char *pointer,
                           const char *message)
{
    json_int_t values[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err;
    assert_int_equal(check(model, text, values, &err), REMAT_EINVAL);
    assert_int_equal(err.code, REMAT_EINVAL);
    assert_string_equal(err.pointer, pointer);
    assert_string_equal(err.message, message);
}

static void options(void **state)
{
    json_int_t v[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err;
    /* Defaults, and what is given over them (d_model, heads, layers, seq_len, vocab). */
    assert_int_equal(check("gpt", NULL, v, &err), REMAT_OK);
    json_int_t dflt[] = {768, 12, 12, 512, 50257};
    assert_memory_equal(v, dflt, sizeof dflt);
    assert_int_equal(check("gpt", "{\"vocab\":7,\"layers\":10000}", v, &err), REMAT_OK);
    json_int_t given[] = {768, 12, 10000, 512, 7};
    assert_memory_equal(v, given, sizeof given);
    assert_int_equal(check("gpt", "{}", v, &err), REMAT_OK);
    assert_int_equal(check("alexnet", NULL, v, &err), REMAT_OK);
    assert_int_equal(check(NULL, NULL, v, &err), REMAT_OK);

    /* rematd's messages, unchanged since they were written in its route. */
    expect_invalid("alexnet", "{}", "/model_options",
                   "model_options is an object, and only for model gpt");
    expect_invalid(NULL, "{\"layers\":2}", "/model_options",
                   "model_options is an object, and only for model gpt");
    expect_invalid("gpt", "[1]", "/model_options",
                   "model_options is an object, and only for model gpt");
    expect_invalid("gpt", "null", "/model_options",
                   "model_options is an object, and only for model gpt");
    expect_invalid("gpt", "{\"depth\":3}", "/model_options/depth", "unknown field 'depth'");
    /* An unknown name is reported before a bad value that comes first. */
    expect_invalid("gpt", "{\"layers\":0,\"depth\":3}", "/model_options/depth",
                   "unknown field 'depth'");
    expect_invalid("gpt", "{\"seq_len\":\"x\"}", "/model_options/seq_len",
                   "seq_len must be an integer in 1..1048576");
    expect_invalid("gpt", "{\"d_model\":1048577}", "/model_options/d_model",
                   "d_model must be an integer in 1..1048576");
    expect_invalid("gpt", "{\"heads\":2.5}", "/model_options/heads",
                   "heads must be an integer in 1..1048576");
    expect_invalid("gpt", "{\"layers\":0}", "/model_options/layers",
                   "layers must be an integer in 1..10000");
    expect_invalid("gpt", "{\"layers\":10001}", "/model_options/layers",
                   "layers must be an integer in 1..10000");
    expect_invalid("gpt", "{\"vocab\":-1}", "/model_options/vocab",
                   "vocab must be an integer in 1..1048576");
    /* err may be NULL. */
    json_t *bad = json_pack("{s:i}", "depth", 1);
    assert_int_equal(rematx_zoo_options(rematx_zoo_find("gpt"), bad, v, NULL), REMAT_EINVAL);
    json_decref(bad);
}

static void input_shapes(void **state)
{
    json_int_t v[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err;
    assert_int_equal(check("gpt", "{\"seq_len\":64}", v, &err), REMAT_OK);
    json_t *s = rematx_zoo_input_shape(rematx_zoo_find("gpt"), v);
    char *t = json_dumps(s, JSON_COMPACT);
    assert_string_equal(t, "[64]");
    free(t);
    json_decref(s);
    assert_int_equal(check("resnet50", NULL, v, &err), REMAT_OK);
    s = rematx_zoo_input_shape(rematx_zoo_find("resnet50"), v);
    t = json_dumps(s, JSON_COMPACT);
    assert_string_equal(t, "[3,224,224]");
    free(t);
    json_decref(s);
}

/* The operations under the allocation-failure loop: arg 0 is the list,
 * 2i+1 model i's layers, 2i+2 its input shape. */
static int zoo_op(const struct remat_profile *p, int64_t arg)
{
    (void)p;
    json_int_t v[REMATX_ZOO_MAX_OPTIONS];
    json_t *out;
    if (arg == 0) {
        out = rematx_zoo_list_json();
    } else {
        const struct rematx_zoo_model *m = rematx_zoo_at((size_t)(arg - 1) / 2);
        assert_int_equal(rematx_zoo_options(m, NULL, v, NULL), REMAT_OK);
        out = arg % 2 ? rematx_zoo_layers(m, v) : rematx_zoo_input_shape(m, v);
    }
    if (out == NULL)
        return 1;
    json_decref(out);
    return 0;
}

/* Every layer every zoo model emits is one the layer table
 * (src/rematx/layers.h) takes, so the worker's builder, which checks a
 * spec by the same table, builds it; the image classifiers' lists use a
 * request's types only (a client could send them as "layers"), and gpt's
 * only its embedding and head's norm besides. */
static void layers_by_the_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < rematx_zoo_count(); i++) {
        const struct rematx_zoo_model *m = rematx_zoo_at(i);
        json_t *ls = layers_of(m->name, NULL);
        assert_non_null(ls);
        size_t k;
        json_t *l;
        json_array_foreach (ls, k, l) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/layers/%zu", k);
            struct remat_error err = {0};
            if (rematx_layer_check(l, ptr, 1, &err) != REMAT_OK)
                fail_msg("%s: %s: %s", m->name, err.pointer, err.message);
            int t = rematx_layer_type_find(json_string_value(json_object_get(l, "type")));
            int request = rematx_layer_check(l, ptr, 0, &err) == REMAT_OK;
            if (strcmp(m->family, "cnn") == 0)
                assert_true(request);
            else if (!request)
                assert_true(t == REMATX_LAYER_gpt_embedding || t == REMATX_LAYER_sequential);
        }
        json_decref(ls);
    }
}

static void out_of_memory_everywhere(void **state)
{
    failalloc_install_jansson();
    for (int64_t arg = 0; arg <= 2 * (int64_t)rematx_zoo_count(); arg++) {
        char what[64];
        snprintf(what, sizeof what, "%s %s", rematx_zoo_at(arg ? (size_t)(arg - 1) / 2 : 0)->name,
                 arg == 0  ? "list"
                 : arg % 2 ? "layers"
                           : "input shape");
        failalloc_torture(NULL, zoo_op, arg, what, 100000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_lists_as_before),
        cmocka_unit_test(models_list_as_before),
        cmocka_unit_test(find),
        cmocka_unit_test(options),
        cmocka_unit_test(input_shapes),
        cmocka_unit_test(layers_by_the_table),
        cmocka_unit_test(out_of_memory_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
