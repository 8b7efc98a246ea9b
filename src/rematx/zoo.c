/* zoo.c - the built-in model zoo (zoo.h): the table every part of remat
 * reads, the checks of a request's model_options, and the expansion of a
 * zoo model into its layer list (the JSON docs/worker.md describes, built
 * into stages by remat-worker). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "remat.h"
#include "rematx/error.h"
#include "rematx/pointer.h"
#include "rematx/zoo.h"

enum zoo_kind { ZOO_ALEXNET, ZOO_VGG, ZOO_RESNET, ZOO_GPT };

static const char *const dtypes[] = {"fp32", "fp16", "bf16", NULL};

/* gpt's options; the indices below name them in gpt_layers. */
enum { GPT_D_MODEL, GPT_HEADS, GPT_LAYERS, GPT_SEQ_LEN, GPT_VOCAB, GPT_N_OPTIONS };
static const struct rematx_zoo_option gpt_options[GPT_N_OPTIONS] = {
    [GPT_D_MODEL] = {"d_model", 768, 1, 1 << 20},
    [GPT_HEADS] = {"heads", 12, 1, 1 << 20},
    /* Each layer is a stage the worker builds and measures in turn. */
    [GPT_LAYERS] = {"layers", 12, 1, 10000},
    [GPT_SEQ_LEN] = {"seq_len", 512, 1, 1 << 20},
    [GPT_VOCAB] = {"vocab", 50257, 1, 1 << 20},
};

/* The image classifiers: 224x224 RGB unless a request says otherwise. */
#define CNN(name_, description_, kind_, variant_)                                                  \
    {                                                                                              \
        .name = name_, .family = "cnn", .description = description_, .n_input_dims = 3,            \
        .input_shape = {3, 224, 224}, .dtypes = dtypes, .kind = kind_, .variant = variant_         \
    }
static const struct rematx_zoo_model zoo[] = {
    CNN("alexnet", "AlexNet (Krizhevsky et al. 2012)", ZOO_ALEXNET, 0),
    CNN("vgg11", "VGG-11 with batch norm off", ZOO_VGG, 0),
    CNN("vgg16", "VGG-16", ZOO_VGG, 1),
    CNN("vgg19", "VGG-19", ZOO_VGG, 2),
    CNN("resnet18", "ResNet-18, basic blocks as stages", ZOO_RESNET, 0),
    CNN("resnet50", "ResNet-50, bottleneck blocks as stages", ZOO_RESNET, 1),
    CNN("resnet101", "ResNet-101, bottleneck blocks as stages", ZOO_RESNET, 2),
    CNN("resnet152", "ResNet-152, bottleneck blocks as stages", ZOO_RESNET, 3),
    {.name = "gpt",
     .family = "transformer",
     .description = "GPT-style decoder, one transformer block per stage",
     .n_input_dims = 1,
     .input_shape = {512},
     .input_shape_option = "seq_len",
     .dtypes = dtypes,
     .n_options = GPT_N_OPTIONS,
     .options = gpt_options,
     .kind = ZOO_GPT},
};
#undef CNN
#define N_ZOO (sizeof zoo / sizeof zoo[0])

size_t rematx_zoo_count(void)
{
    return N_ZOO;
}

const struct rematx_zoo_model *rematx_zoo_at(size_t i)
{
    return i < N_ZOO ? &zoo[i] : NULL;
}

const struct rematx_zoo_model *rematx_zoo_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_ZOO; i++)
        if (strcmp(zoo[i].name, name) == 0)
            return &zoo[i];
    return NULL;
}

/* ------------------------------------------------------------------------
 * The list and the options
 */

/* Sets key on an object being built; a failure (the value is freed) marks
 * *bad. */
static void set(json_t *o, const char *key, json_t *v, int *bad)
{
    if (json_object_set_new(o, key, v) < 0)
        *bad = 1;
}

json_t *rematx_zoo_list_json(void)
{
    json_t *list = json_array();
    int bad = list == NULL;
    for (size_t i = 0; !bad && i < N_ZOO; i++) {
        const struct rematx_zoo_model *m = &zoo[i];
        json_int_t values[REMATX_ZOO_MAX_OPTIONS];
        for (size_t k = 0; k < m->n_options; k++)
            values[k] = m->options[k].dflt;
        json_t *o = json_object();
        set(o, "name", json_string(m->name), &bad);
        set(o, "family", json_string(m->family), &bad);
        set(o, "description", json_string(m->description), &bad);
        set(o, "default_input_shape", rematx_zoo_input_shape(m, values), &bad);
        json_t *dt = json_array();
        for (size_t k = 0; m->dtypes[k] != NULL; k++)
            bad |= json_array_append_new(dt, json_string(m->dtypes[k])) < 0;
        set(o, "dtypes", dt, &bad);
        if (m->n_options > 0) {
            json_t *opts = json_object();
            for (size_t k = 0; k < m->n_options; k++)
                set(opts, m->options[k].name, json_integer(m->options[k].dflt), &bad);
            set(o, "model_options", opts, &bad);
        }
        bad |= json_array_append_new(list, o) < 0;
    }
    json_t *root = bad ? NULL : json_object();
    if (root == NULL) {
        json_decref(list);
        return NULL;
    }
    if (json_object_set_new(root, "models", list) < 0) { /* which frees list */
        json_decref(root);
        return NULL;
    }
    return root;
}

int rematx_zoo_options(const struct rematx_zoo_model *m, const json_t *model_options,
                       json_int_t values[REMATX_ZOO_MAX_OPTIONS], struct remat_error *err)
{
    size_t n = m != NULL ? m->n_options : 0;
    for (size_t k = 0; k < n; k++)
        values[k] = m->options[k].dflt;
    if (model_options == NULL)
        return REMAT_OK;
    if (n == 0 || !json_is_object(model_options)) {
        /* Names the models that take options, so the message stays true
         * when the zoo grows. */
        char which[160] = "";
        size_t used = 0, count = 0;
        for (size_t i = 0; i < N_ZOO; i++)
            if (zoo[i].n_options > 0 && used < sizeof which) {
                int w = snprintf(which + used, sizeof which - used, "%s%s", count ? ", " : "",
                                 zoo[i].name);
                used += w > 0 ? (size_t)w : 0;
                count++;
            }
        return rematx_error(err, REMAT_EINVAL, "/model_options",
                            "model_options is an object, and only for model%s %s",
                            count > 1 ? "s" : "", which);
    }
    /* Every name first, then every value, both in the object's order: the
     * first problem a client sees does not depend on the table's order. */
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)model_options, key, v) {
        size_t k = 0;
        while (k < n && strcmp(m->options[k].name, key) != 0)
            k++;
        if (k == n) {
            char ptr[128];
            snprintf(ptr, sizeof ptr, "/model_options");
            rematx_pointer_append(ptr, sizeof ptr, key);
            return rematx_error(err, REMAT_EINVAL, ptr, "unknown field '%.100s'", key);
        }
    }
    json_object_foreach ((json_t *)model_options, key, v) {
        size_t k = 0;
        while (strcmp(m->options[k].name, key) != 0)
            k++;
        const struct rematx_zoo_option *o = &m->options[k];
        if (!json_is_integer(v) || json_integer_value(v) < o->min ||
            json_integer_value(v) > o->max) {
            char ptr[128];
            snprintf(ptr, sizeof ptr, "/model_options/%s", o->name);
            return rematx_error(err, REMAT_EINVAL, ptr, "%s must be an integer in %lld..%lld",
                                o->name, (long long)o->min, (long long)o->max);
        }
        values[k] = json_integer_value(v);
    }
    return REMAT_OK;
}

json_t *rematx_zoo_input_shape(const struct rematx_zoo_model *m, const json_int_t *values)
{
    json_t *shape = json_array();
    if (m->input_shape_option != NULL) {
        for (size_t k = 0; k < m->n_options; k++)
            if (strcmp(m->options[k].name, m->input_shape_option) == 0 &&
                json_array_append_new(shape, json_integer(values[k])) < 0) {
                json_decref(shape);
                return NULL;
            }
        return shape;
    }
    for (size_t k = 0; k < m->n_input_dims; k++)
        if (json_array_append_new(shape, json_integer(m->input_shape[k])) < 0) {
            json_decref(shape);
            return NULL;
        }
    return shape;
}

/* ------------------------------------------------------------------------
 * Layer lists.  Each helper returns a new layer object or NULL when out of
 * memory; put() names a layer and appends it, and remembers any failure.
 */

struct layers {
    json_t *list;
    int bad;
};

static void put(struct layers *ls, json_t *layer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(struct layers *ls, json_t *layer, const char *fmt, ...)
{
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (layer == NULL) {
        ls->bad = 1;
        return;
    }
    if (json_object_set_new(layer, "name", json_string(name)) < 0) {
        json_decref(layer);
        ls->bad = 1;
        return;
    }
    if (json_array_append_new(ls->list, layer) < 0)
        ls->bad = 1;
}

static json_t *simple(const char *type)
{
    return json_pack("{s:s}", "type", type);
}

static json_t *conv(json_int_t out, json_int_t k, json_int_t s, json_int_t p, int bias)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:b}", "type", "conv2d", "out_channels", out,
                     "kernel_size", k, "stride", s, "padding", p, "bias", bias);
}

static json_t *maxpool(json_int_t k, json_int_t s, json_int_t p)
{
    return json_pack("{s:s, s:I, s:I, s:I}", "type", "maxpool2d", "kernel_size", k, "stride", s,
                     "padding", p);
}

static json_t *linear(json_int_t out)
{
    return json_pack("{s:s, s:I}", "type", "linear", "out_features", out);
}

static json_t *adaptive(json_int_t size)
{
    return json_pack("{s:s, s:[I,I]}", "type", "adaptive_avgpool2d", "output_size", size, size);
}

static json_t *dropout(void)
{
    return json_pack("{s:s, s:f}", "type", "dropout", "p", 0.5);
}

/* A stage of several layers; takes the n inner layers (any may be NULL). */
static json_t *sequential(size_t n, json_t *const *inner)
{
    json_t *arr = json_array();
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        bad |= json_array_append_new(arr, inner[k]) < 0; /* frees inner[k] on failure */
    json_t *o = bad ? NULL : simple("sequential");
    if (o == NULL || json_object_set_new(o, "layers", arr) < 0) {
        if (o == NULL)
            json_decref(arr);
        json_decref(o);
        return NULL;
    }
    return o;
}

/* torchvision's AlexNet and VGG end alike; the flatten rides with the
 * pooling stage, since a stage of its own would only be a view of its
 * input.  AlexNet puts the dropout before each fully connected layer, VGG
 * after each ReLU. */
static void classifier(struct layers *ls, json_int_t pool, int dropout_first)
{
    json_t *avg[] = {adaptive(pool), simple("flatten")};
    put(ls, sequential(2, avg), "avgpool");
    for (int k = 6; k <= 7; k++) {
        if (dropout_first)
            put(ls, dropout(), "drop%d", k);
        put(ls, linear(4096), "fc%d", k);
        put(ls, simple("relu"), "relu%d", k);
        if (!dropout_first)
            put(ls, dropout(), "drop%d", k);
    }
    put(ls, linear(1000), "fc8");
}

static void alexnet_layers(struct layers *ls)
{
    /* torchvision's AlexNet, one layer per stage. */
    static const struct {
        json_int_t out, k, s, p;
        int pool;
    } c[] = {{64, 11, 4, 2, 1},
             {192, 5, 1, 2, 1},
             {384, 3, 1, 1, 0},
             {256, 3, 1, 1, 0},
             {256, 3, 1, 1, 1}};
    for (int i = 0; i < 5; i++) {
        put(ls, conv(c[i].out, c[i].k, c[i].s, c[i].p, 1), "conv%d", i + 1);
        put(ls, simple("relu"), "relu%d", i + 1);
        if (c[i].pool)
            put(ls, maxpool(3, 2, 0), "pool%d", i + 1);
    }
    classifier(ls, 6, 1);
}

static void vgg_layers(struct layers *ls, int variant)
{
    /* Convolutions per block of VGG-11, -16 and -19. */
    static const int per[3][5] = {{1, 1, 2, 2, 2}, {2, 2, 3, 3, 3}, {2, 2, 4, 4, 4}};
    static const json_int_t width[5] = {64, 128, 256, 512, 512};
    int n = 0;
    for (int b = 0; b < 5; b++) {
        for (int j = 0; j < per[variant][b]; j++) {
            n++;
            put(ls, conv(width[b], 3, 1, 1, 1), "conv%d", n);
            put(ls, simple("relu"), "relu%d", n);
        }
        put(ls, maxpool(2, 2, 0), "pool%d", b + 1);
    }
    classifier(ls, 7, 0);
}

static void resnet_layers(struct layers *ls, int variant)
{
    /* Blocks per group of ResNet-18, -50, -101 and -152. */
    static const int depth[4][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}};
    int bottleneck = variant > 0;
    json_t *stem[] = {conv(64, 7, 2, 3, 0), simple("batchnorm2d"), simple("relu"),
                      maxpool(3, 2, 1)};
    put(ls, sequential(4, stem), "stem");
    for (int l = 0; l < 4; l++)
        for (int b = 0; b < depth[variant][l]; b++)
            put(ls,
                json_pack("{s:s, s:s, s:I, s:I}", "type", "residual_block", "variant",
                          bottleneck ? "bottleneck" : "basic", "planes", (json_int_t)(64 << l),
                          "stride", (json_int_t)(l > 0 && b == 0 ? 2 : 1)),
                "layer%d.%d", l + 1, b);
    json_t *head[] = {adaptive(1), simple("flatten"), linear(1000)};
    put(ls, sequential(3, head), "head");
}

static void gpt_layers(struct layers *ls, const json_int_t *v)
{
    put(ls,
        json_pack("{s:s, s:I, s:I}", "type", "gpt_embedding", "vocab", v[GPT_VOCAB], "d_model",
                  v[GPT_D_MODEL]),
        "embedding");
    for (json_int_t i = 0; i < v[GPT_LAYERS] && !ls->bad; i++)
        put(ls,
            json_pack("{s:s, s:I, s:I}", "type", "transformer_block", "d_model", v[GPT_D_MODEL],
                      "heads", v[GPT_HEADS]),
            "block%lld", (long long)i);
    json_t *head[] = {simple("layernorm"), json_pack("{s:s, s:I, s:b}", "type", "linear",
                                                     "out_features", v[GPT_VOCAB], "bias", 0)};
    put(ls, sequential(2, head), "head");
}

json_t *rematx_zoo_layers(const struct rematx_zoo_model *m, const json_int_t *values)
{
    struct layers ls = {json_array(), 0};
    if (ls.list == NULL)
        return NULL;
    switch (m->kind) {
    case ZOO_ALEXNET:
        alexnet_layers(&ls);
        break;
    case ZOO_VGG:
        vgg_layers(&ls, m->variant);
        break;
    case ZOO_RESNET:
        resnet_layers(&ls, m->variant);
        break;
    case ZOO_GPT:
        gpt_layers(&ls, values);
        break;
    default:
        ls.bad = 1;
    }
    if (ls.bad) {
        json_decref(ls.list);
        return NULL;
    }
    return ls.list;
}
