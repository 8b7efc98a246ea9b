/* test_layers - the layer vocabulary of src/rematx/layers.h: the checks
 * rematd gives a request's layer list and remat-worker its spec (each
 * problem with its pointer and message), the readers' defaults, and the
 * names and error helpers beside it (rematx_algorithm_names, whose list
 * rematd's "algorithm must be one of" says, and rematx_error). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rematx/rematx.h"

/* Checks text (one layer's JSON) as rematd does, at /layers/0. */
static int check(const char *text, int zoo_types, struct remat_error *err)
{
    json_error_t je;
    json_t *l = json_loads(text, JSON_DECODE_ANY, &je);
    if (l == NULL)
        fail_msg("bad test JSON %s: %s", text, je.text);
    memset(err, 0, sizeof *err);
    int rc = rematx_layer_check(l, "/layers/0", zoo_types, err);
    json_decref(l);
    return rc;
}

static void expect(const char *text, int code, const char *pointer, const char *message)
{
    struct remat_error err;
    int rc = check(text, 0, &err);
    if (rc != code || strcmp(err.pointer, pointer) != 0 || strcmp(err.message, message) != 0)
        fail_msg("%s: got %d %s \"%s\", want %d %s \"%s\"", text, rc, err.pointer, err.message,
                 code, pointer, message);
    assert_int_equal(err.code, code);
}

static void accepted(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "{\"type\":\"relu\"}",
        "{\"type\":\"relu\",\"name\":\"act\"}",
        "{\"type\":\"conv2d\",\"out_channels\":8,\"kernel_size\":3,\"stride\":1,\"padding\":1,"
        "\"groups\":1,\"bias\":false}",
        "{\"type\":\"conv2d\",\"out_channels\":1048576}",
        "{\"type\":\"dropout\",\"p\":0}",
        "{\"type\":\"dropout\",\"p\":1}",
        "{\"type\":\"maxpool2d\",\"kernel_size\":2}",
        "{\"type\":\"adaptive_avgpool2d\",\"output_size\":[7,7]}",
        "{\"type\":\"linear\",\"out_features\":10,\"bias\":true}",
        "{\"type\":\"residual_block\",\"planes\":64,\"variant\":\"bottleneck\",\"stride\":2}",
        "{\"type\":\"transformer_block\",\"d_model\":64,\"heads\":4}",
        "{\"type\":\"sequential\",\"layers\":[{\"type\":\"flatten\"},"
        "{\"type\":\"sequential\",\"layers\":[{\"type\":\"linear\",\"out_features\":2}]}]}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct remat_error err;
        if (check(ok[i], 0, &err) != REMAT_OK)
            fail_msg("%s refused: %s %s", ok[i], err.pointer, err.message);
    }
}

static void refused(void **state)
{
    (void)state;
    expect("3", REMAT_EINVAL, "/layers/0", "a layer is an object with a type");
    expect("{}", REMAT_EINVAL, "/layers/0/type", "unknown layer type");
    expect("{\"type\":\"conv3d\"}", REMAT_EINVAL, "/layers/0/type", "unknown layer type");
    /* The zoo's own types are not a request's. */
    expect("{\"type\":\"layernorm\"}", REMAT_EINVAL, "/layers/0/type", "unknown layer type");
    expect("{\"type\":\"relu\",\"name\":7}", REMAT_EINVAL, "/layers/0/name",
           "name must be a string under 256 bytes");
    expect("{\"type\":\"relu\",\"p\":0.5}", REMAT_EINVAL, "/layers/0/p",
           "unknown field for a relu layer");
    expect("{\"type\":\"relu\",\"a/b\":1}", REMAT_EINVAL, "/layers/0/a~1b",
           "unknown field for a relu layer");
    expect("{\"type\":\"conv2d\",\"out_channels\":-3}", REMAT_EINVAL, "/layers/0/out_channels",
           "out_channels must be an integer in 0..1048576");
    expect("{\"type\":\"conv2d\",\"out_channels\":1048577}", REMAT_EINVAL, "/layers/0/out_channels",
           "out_channels must be an integer in 0..1048576");
    expect("{\"type\":\"conv2d\",\"out_channels\":8,\"kernel_size\":[3,3]}", REMAT_EINVAL,
           "/layers/0/kernel_size", "kernel_size must be an integer in 0..1048576");
    expect("{\"type\":\"conv2d\",\"out_channels\":8,\"bias\":1}", REMAT_EINVAL, "/layers/0/bias",
           "bias must be true or false");
    expect("{\"type\":\"conv2d\",\"kernel_size\":3}", REMAT_EINVAL, "/layers/0/out_channels",
           "a conv2d layer needs out_channels");
    expect("{\"type\":\"linear\"}", REMAT_EINVAL, "/layers/0/out_features",
           "a linear layer needs out_features");
    expect("{\"type\":\"dropout\",\"p\":1.5}", REMAT_EINVAL, "/layers/0/p",
           "p must be a number in 0..1");
    expect("{\"type\":\"residual_block\",\"planes\":8,\"variant\":\"wide\"}", REMAT_EINVAL,
           "/layers/0/variant", "variant must be basic or bottleneck");
    expect("{\"type\":\"adaptive_avgpool2d\",\"output_size\":[0,1]}", REMAT_EINVAL,
           "/layers/0/output_size", "output_size must be [h, w], both >= 1");
    expect("{\"type\":\"adaptive_avgpool2d\",\"output_size\":7}", REMAT_EINVAL,
           "/layers/0/output_size", "output_size must be [h, w], both >= 1");
    expect("{\"type\":\"sequential\"}", REMAT_EINVAL, "/layers/0/layers",
           "a sequential layer needs layers");
    expect("{\"type\":\"sequential\",\"layers\":[]}", REMAT_EINVAL, "/layers/0/layers",
           "layers must be a non-empty array");
    expect("{\"type\":\"sequential\",\"layers\":[{\"type\":\"relu\"},{\"type\":\"x\"}]}",
           REMAT_EINVAL, "/layers/0/layers/1/type", "unknown layer type");
    expect("{\"type\":\"sequential\",\"layers\":[{\"type\":\"linear\",\"out_features\":true}]}",
           REMAT_EINVAL, "/layers/0/layers/0/out_features",
           "out_features must be an integer in 0..1048576");
}

static void nested_limit(void **state)
{
    (void)state;
    json_t *inner = json_array();
    for (int i = 0; i <= REMATX_MAX_NESTED_LAYERS; i++)
        json_array_append_new(inner, json_pack("{s:s}", "type", "relu"));
    json_t *l = json_pack("{s:s, s:o}", "type", "sequential", "layers", inner);
    struct remat_error err = {0};
    assert_int_equal(rematx_layer_check(l, "/layers/2", 0, &err), REMAT_ELIMIT);
    assert_string_equal(err.pointer, "/layers/2/layers");
    assert_string_equal(err.message, "1001 layers; at most 1000");
    json_array_remove(inner, 0);
    assert_int_equal(rematx_layer_check(l, "/layers/2", 0, &err), REMAT_OK);
    json_decref(l);
}

static void zoo_types(void **state)
{
    (void)state;
    struct remat_error err;
    assert_int_equal(check("{\"type\":\"layernorm\"}", 1, &err), REMAT_OK);
    assert_int_equal(check("{\"type\":\"gpt_embedding\",\"vocab\":10,\"d_model\":4}", 1, &err),
                     REMAT_OK);
    assert_int_equal(check("{\"type\":\"gpt_embedding\",\"vocab\":0,\"d_model\":4}", 1, &err),
                     REMAT_EINVAL);
    assert_string_equal(err.pointer, "/layers/0/vocab");
    assert_int_equal(check("{\"type\":\"gpt_embedding\",\"vocab\":10}", 1, &err), REMAT_EINVAL);
    assert_string_equal(err.message, "a gpt_embedding layer needs d_model");
    for (int t = 0; t < REMATX_N_LAYER_TYPES; t++) {
        const char *name = rematx_layer_type_name(t);
        assert_non_null(name);
        assert_int_equal(rematx_layer_type_find(name), t);
        int zoo_only = strcmp(name, "layernorm") == 0 || strcmp(name, "gpt_embedding") == 0;
        assert_int_equal(rematx_layer_type_requestable(t), !zoo_only);
    }
    assert_null(rematx_layer_type_name(REMATX_N_LAYER_TYPES));
    assert_int_equal(rematx_layer_type_find("nope"), -1);
    assert_int_equal(rematx_layer_type_find(NULL), -1);
}

/* The table itself: every argument of a type the table has, a required one
 * without a default, bounds in order, a choice list for a CHOICE only. */
static void table_rows(void **state)
{
    (void)state;
    for (int a = 0; a < REMATX_N_LAYER_ARGS; a++) {
        const struct rematx_layer_arg_info *i = rematx_layer_arg_at(a);
        assert_non_null(i);
        assert_non_null(rematx_layer_type_name((int)i->type));
        assert_true(i->min <= i->max);
        if (i->required)
            assert_true(i->dflt == REMATX_NO_DEFAULT);
        else if (i->dflt != REMATX_NO_DEFAULT && i->kind != REMATX_ARG_CHOICE)
            assert_true(i->dflt >= i->min && i->dflt <= i->max);
        assert_int_equal(i->choices != NULL, i->kind == REMATX_ARG_CHOICE);
        for (int b = 0; b < a; b++) {
            const struct rematx_layer_arg_info *o = rematx_layer_arg_at(b);
            if (o->type == i->type && strcmp(o->name, i->name) == 0)
                fail_msg("%s.%s twice", rematx_layer_type_name((int)i->type), i->name);
        }
    }
    assert_null(rematx_layer_arg_at(REMATX_N_LAYER_ARGS));
    assert_null(rematx_layer_arg_at(-1));
}

static void readers(void **state)
{
    (void)state;
    json_t *conv = json_pack("{s:s, s:i}", "type", "conv2d", "out_channels", 8);
    assert_int_equal(rematx_layer_int(conv, REMATX_ARG_conv2d_out_channels), 8);
    assert_int_equal(rematx_layer_int(conv, REMATX_ARG_conv2d_kernel_size), 3);
    assert_int_equal(rematx_layer_int(conv, REMATX_ARG_conv2d_stride), 1);
    assert_int_equal(rematx_layer_int(conv, REMATX_ARG_conv2d_padding), 0);
    assert_int_equal(rematx_layer_int(conv, REMATX_ARG_conv2d_groups), 1);
    assert_int_equal(rematx_layer_bool(conv, REMATX_ARG_conv2d_bias), 1);
    assert_true(rematx_layer_has(conv, REMATX_ARG_conv2d_out_channels));
    assert_false(rematx_layer_has(conv, REMATX_ARG_conv2d_bias));
    json_object_set_new(conv, "bias", json_false());
    assert_int_equal(rematx_layer_bool(conv, REMATX_ARG_conv2d_bias), 0);
    json_decref(conv);

    json_t *pool = json_pack("{s:s}", "type", "maxpool2d");
    assert_int_equal(rematx_layer_int(pool, REMATX_ARG_maxpool2d_kernel_size), 2);
    assert_false(rematx_layer_has(pool, REMATX_ARG_maxpool2d_stride));
    assert_int_equal(rematx_layer_int(pool, REMATX_ARG_maxpool2d_stride), REMATX_NO_DEFAULT);
    json_decref(pool);

    json_t *drop = json_pack("{s:s}", "type", "dropout");
    assert_true(rematx_layer_number(drop, REMATX_ARG_dropout_p) == 0.5);
    json_object_set_new(drop, "p", json_integer(1));
    assert_true(rematx_layer_number(drop, REMATX_ARG_dropout_p) == 1.0);
    json_decref(drop);

    json_t *res = json_pack("{s:s, s:i}", "type", "residual_block", "planes", 4);
    assert_int_equal(rematx_layer_choice(res, REMATX_ARG_residual_block_variant), 0);
    json_object_set_new(res, "variant", json_string("bottleneck"));
    assert_int_equal(rematx_layer_choice(res, REMATX_ARG_residual_block_variant), 1);
    json_decref(res);

    json_t *ad = json_pack("{s:s}", "type", "adaptive_avgpool2d");
    json_int_t o[2];
    rematx_layer_size2(ad, REMATX_ARG_adaptive_avgpool2d_output_size, o);
    assert_true(o[0] == 1 && o[1] == 1);
    json_object_set_new(ad, "output_size", json_pack("[i,i]", 6, 7));
    rematx_layer_size2(ad, REMATX_ARG_adaptive_avgpool2d_output_size, o);
    assert_true(o[0] == 6 && o[1] == 7);
    json_decref(ad);
}

static void algorithm_names(void **state)
{
    (void)state;
    char buf[256];
    const char *s = rematx_algorithm_names(buf, sizeof buf);
    assert_ptr_equal(s, buf);
    /* Every name of the table, in its order, ", "-separated. */
    char want[256] = "";
    for (int a = 0; a < REMAT_ALG_COUNT; a++) {
        strcat(want, a ? ", " : "");
        strcat(want, remat_algorithm_name((enum remat_algorithm)a));
    }
    assert_string_equal(buf, want);
    assert_non_null(strstr(buf, "store-all, "));
    assert_non_null(strstr(buf, ", min-time"));
    /* Cut to fit, and terminated. */
    char small[12];
    rematx_algorithm_names(small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, want, sizeof small - 1);
}

static void error_helper(void **state)
{
    (void)state;
    struct remat_error err;
    memset(&err, 'x', sizeof err);
    assert_int_equal(rematx_error(&err, REMAT_ELIMIT, NULL, "a %s\nb", "c"), REMAT_ELIMIT);
    assert_int_equal(err.code, REMAT_ELIMIT);
    assert_string_equal(err.pointer, "");
    assert_string_equal(err.message, "a c b");
    assert_int_equal(rematx_error(NULL, REMAT_EINVAL, "/x", "y"), REMAT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted),        cmocka_unit_test(refused),
        cmocka_unit_test(nested_limit),    cmocka_unit_test(zoo_types),
        cmocka_unit_test(table_rows),      cmocka_unit_test(readers),
        cmocka_unit_test(algorithm_names), cmocka_unit_test(error_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
