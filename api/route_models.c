/* GET /v1/models: the built-in zoo a profile job can name, with the input
 * shape each expects (batch dimension excluded) and its options. */
#include "config.h"

#include <string.h>

#include "rematd.h"

static const struct {
    const char *name, *family, *description;
    int shape[3];
    int n_shape;
} zoo[] = {
    {"alexnet", "cnn", "AlexNet (Krizhevsky et al. 2012)", {3, 224, 224}, 3},
    {"vgg11", "cnn", "VGG-11 with batch norm off", {3, 224, 224}, 3},
    {"vgg16", "cnn", "VGG-16", {3, 224, 224}, 3},
    {"vgg19", "cnn", "VGG-19", {3, 224, 224}, 3},
    {"resnet18", "cnn", "ResNet-18, basic blocks as stages", {3, 224, 224}, 3},
    {"resnet50", "cnn", "ResNet-50, bottleneck blocks as stages", {3, 224, 224}, 3},
    {"resnet101", "cnn", "ResNet-101, bottleneck blocks as stages", {3, 224, 224}, 3},
    {"resnet152", "cnn", "ResNet-152, bottleneck blocks as stages", {3, 224, 224}, 3},
    {"gpt", "transformer", "GPT-style decoder, one transformer block per stage", {512, 0, 0}, 1},
};

int rematd_zoo_has(const char *name)
{
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++)
        if (strcmp(zoo[i].name, name) == 0)
            return 1;
    return 0;
}

json_t *rematd_zoo(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        json_t *shape = json_array();
        for (int k = 0; k < zoo[i].n_shape; k++)
            json_array_append_new(shape, json_integer(zoo[i].shape[k]));
        json_t *m = json_pack("{s:s, s:s, s:s, s:o, s:[s,s,s]}", "name", zoo[i].name, "family",
                              zoo[i].family, "description", zoo[i].description,
                              "default_input_shape", shape, "dtypes", "fp32", "fp16", "bf16");
        if (m && strcmp(zoo[i].name, "gpt") == 0)
            json_object_set_new(m, "model_options",
                                json_pack("{s:i, s:i, s:i, s:i, s:i}", "d_model", 768, "heads", 12,
                                          "layers", 12, "seq_len", 512, "vocab", 50257));
        json_array_append_new(list, m);
    }
    return json_pack("{s:o}", "models", list);
}

static enum rematd_handled models(struct rematd_request *r)
{
    rematd_req_json(r, 200, rematd_zoo());
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_models = {.method = "GET",
                                                 .pattern = "/v1/models",
                                                 .name = "models",
                                                 .auth = REMATD_AUTH_CLIENT,
                                                 .handler = models};
