/* fuzz_result.c - the worker result checker (api/worker_check.c) on any
 * job spec and result: never a crash, and what it accepts is what the
 * routes downstream rely on: an accepted profile reads as a profile of the
 * job's model (its stage count and metadata), an accepted validation
 * result has its required members with the types openapi.yaml gives and
 * the job's predicted peak and step time.
 *
 * The input is two JSON texts separated by a NUL byte: the spec, then the
 * result.  With no NUL, the input is the result and the spec is one of a
 * few fixed jobs (a zoo model and a layer list, on cpu and cuda). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "remat.h"
#include "worker_check.h"

static const char *const fixed_specs[] = {
    "{\"model\":\"alexnet\",\"batch_size\":2,\"dtype\":\"fp32\",\"device\":\"cpu\",\"input_shape\":"
    "[3,224,224],\"warmup\":2,\"repeats\":5}",
    "{\"layers\":[{\"type\":\"relu\"},{\"type\":\"flatten\"}],\"batch_size\":4,\"dtype\":"
    "\"fp16\",\"device\":\"cuda:0\",\"input_shape\":[8]}",
    "{\"model_spec\":{\"model\":\"alexnet\"},\"profile\":{\"format\":\"remat.profile/v1\","
    "\"model\":\"alexnet\",\"batch_size\":2,\"dtype\":\"fp32\",\"input_bytes\":10,\"stages\":[{"
    "\"out_bytes\":5}]},\"plan\":{\"peak_bytes\":1000},\"device\":\"cpu\",\"repeats\":3}",
    "{\"model_spec\":{},\"profile\":{\"stages\":[{},{}]},\"plan\":{\"peak_bytes\":7},\"device\":"
    "\"cuda\",\"timeline\":true}",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    json_t *spec, *result;
    if (nul) {
        size_t a = (size_t)(nul - data);
        spec = json_loadb(text, a, JSON_REJECT_DUPLICATES, NULL);
        result = json_loadb(text + a + 1, size - a - 1, JSON_REJECT_DUPLICATES, NULL);
    } else {
        unsigned pick = size ? data[size - 1] % 4 : 0;
        spec = json_loads(fixed_specs[pick], 0, NULL);
        FUZZ_CHECK(spec != NULL, "fixed spec %u", pick);
        result = json_loadb(text, size, JSON_REJECT_DUPLICATES, NULL);
    }
    const char *kind = json_object_get(spec, "plan") ? "validation" : "profile";
    struct remat_error err;
    int rc = rematd_check_result(kind, spec, result, &err);
    if (rc != REMAT_OK) {
        FUZZ_CHECK(rc < 0 && err.code == rc, "refused with code %d, err.code %d", rc, err.code);
        FUZZ_CHECK(strncmp(err.pointer, "/result", 7) == 0, "pointer '%s' not under /result",
                   err.pointer);
        FUZZ_CHECK(err.message[0] != '\0', "a refusal without a message");
    } else if (strcmp(kind, "profile") == 0) {
        struct remat_profile *p = remat_profile_from_json(result, NULL, NULL);
        FUZZ_CHECK(p != NULL, "an accepted profile does not read");
        const json_t *bs = json_object_get(spec, "batch_size");
        FUZZ_CHECK(json_is_integer(bs) && p->batch_size == json_integer_value(bs),
                   "accepted for another batch size");
        FUZZ_CHECK(p->dtype && json_is_string(json_object_get(spec, "dtype")) &&
                       strcmp(p->dtype, json_string_value(json_object_get(spec, "dtype"))) == 0,
                   "accepted for another dtype");
        const json_t *layers = json_object_get(spec, "layers");
        FUZZ_CHECK(!layers || json_array_size(layers) == p->n_stages,
                   "accepted with %zu stages for %zu layers", p->n_stages, json_array_size(layers));
        remat_profile_free(p);
    } else {
        const json_t *m = json_object_get(result, "measured_peak_bytes");
        const json_t *pr = json_object_get(result, "predicted_peak_bytes");
        FUZZ_CHECK(json_is_integer(m) && json_integer_value(m) >= 0 && json_is_integer(pr) &&
                       json_integer_value(pr) >= 0,
                   "accepted peaks that are not non-negative integers");
        FUZZ_CHECK(json_integer_value(pr) == json_integer_value(json_object_get(
                                                 json_object_get(spec, "plan"), "peak_bytes")),
                   "accepted another plan's prediction");
        FUZZ_CHECK(json_is_string(json_object_get(result, "device")), "accepted without device");
        const json_t *te = json_object_get(result, "step_time_error");
        const json_t *pms = json_object_get(result, "predicted_step_ms");
        double pred = json_number_value(pms);
        double want =
            pred > 0 ? (json_number_value(json_object_get(result, "step_ms")) - pred) / pred : 0;
        FUZZ_CHECK(!te || (pred > 0 && json_is_number(json_object_get(result, "step_ms")) &&
                           fabs(json_number_value(te) - want) <= 1e-6 * (1 + fabs(want))),
                   "accepted a step_time_error that is not (step_ms - predicted) / predicted");
        const json_t *tot = json_object_get(json_object_get(spec, "plan"), "total_ms");
        double t = json_number_value(tot);
        FUZZ_CHECK(!pms || !json_is_number(tot) || fabs(pred - t) <= 1e-9 * (1 + fabs(t)),
                   "accepted another plan's predicted step time");
    }
    json_decref(spec);
    json_decref(result);
    return 0;
}
