/* fuzz_profile.c - the two profile readers against each other on any text:
 * the streaming reader (remat_profile_parse) and the tree path (json_loadb
 * with duplicates rejected, then remat_profile_from_json) must agree
 * exactly, as remat.h promises: both refuse, with the same error code and
 * JSON pointer (and the same message once the text is valid JSON), or both
 * give the same profile, times bit for bit.  A profile read is then written
 * back (remat_profile_to_json) and read again: the same profile.  Only the
 * public API, so the target survives rewrites of the readers. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "fuzz_check.h"
#include "remat.h"

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void same_profile(const struct remat_profile *a, const struct remat_profile *b,
                         const char *what)
{
    FUZZ_CHECK(a->n_stages == b->n_stages, "%s: %zu stages against %zu", what, a->n_stages,
               b->n_stages);
    FUZZ_CHECK(a->input_bytes == b->input_bytes, "%s: input_bytes", what);
    FUZZ_CHECK(a->batch_size == b->batch_size, "%s: batch_size", what);
    FUZZ_CHECK(same_str(a->model, b->model) && same_str(a->dtype, b->dtype) &&
                   same_str(a->device, b->device) && same_str(a->driver, b->driver) &&
                   same_str(a->libtorch, b->libtorch),
               "%s: metadata differs", what);
    for (size_t i = 0; i < a->n_stages; i++) {
        const struct remat_stage *x = &a->stages[i], *y = &b->stages[i];
        FUZZ_CHECK(same_str(x->name, y->name), "%s: stage %zu name", what, i + 1);
        FUZZ_CHECK(x->out_bytes == y->out_bytes && x->saved_bytes == y->saved_bytes &&
                       x->fwd_tmp_bytes == y->fwd_tmp_bytes &&
                       x->bwd_tmp_bytes == y->bwd_tmp_bytes && x->param_bytes == y->param_bytes,
                   "%s: stage %zu bytes", what, i + 1);
        FUZZ_CHECK(memcmp(&x->fwd_ms, &y->fwd_ms, sizeof x->fwd_ms) == 0 &&
                       memcmp(&x->bwd_ms, &y->bwd_ms, sizeof x->bwd_ms) == 0,
                   "%s: stage %zu times", what, i + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    /* The first byte picks the pointer prefix, so both kinds of pointer
     * (a bare profile and one inside a plan request) are compared. */
    const char *prefix = size > 0 && (data[0] & 1) ? "/profile" : NULL;
    struct remat_error et, es;
    memset(&et, 0, sizeof et);
    memset(&es, 0, sizeof es);
    json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, NULL);
    struct remat_profile *pt = root ? remat_profile_from_json(root, prefix, &et) : NULL;
    json_decref(root);
    struct remat_profile *ps = remat_profile_parse(text, size, prefix, &es);
    if (memchr(text, 0, size) && root != NULL && ps == NULL) {
        /* jansson skips a NUL byte right after a number or a literal
         * ("[1\0]" loads), which is not JSON: the streaming reader is
         * right to refuse it (whatever the tree path then makes of the
         * rest), and rematd refuses such bodies before either reader sees
         * them (api/problem.c). */
        remat_profile_free(pt);
        return 0;
    }
    FUZZ_CHECK((pt == NULL) == (ps == NULL), "tree %s (%s), streaming %s (%s)",
               pt ? "read it" : "refused", et.message, ps ? "read it" : "refused", es.message);
    if (ps == NULL) {
        FUZZ_CHECK(es.code < 0, "a refusal with code %d", es.code);
        if (root == NULL) {
            /* Not JSON: jansson's words are its own, the code and the
             * (empty) pointer are not. */
            FUZZ_CHECK(es.code == REMAT_EINVAL && es.pointer[0] == '\0',
                       "syntax error as code %d at '%s'", es.code, es.pointer);
        } else {
            FUZZ_CHECK(et.code == es.code && strcmp(et.pointer, es.pointer) == 0 &&
                           strcmp(et.message, es.message) == 0,
                       "tree %d at '%s' (%s), streaming %d at '%s' (%s)", et.code, et.pointer,
                       et.message, es.code, es.pointer, es.message);
        }
        return 0;
    }
    same_profile(pt, ps, "tree against streaming");
    FUZZ_CHECK(remat_profile_validate(ps, NULL) == REMAT_OK, "a profile read does not validate");
    /* Written back and read again: the same profile. */
    json_t *back = remat_profile_to_json(ps);
    FUZZ_CHECK(back != NULL, "remat_profile_to_json failed");
    char *again = json_dumps(back, JSON_COMPACT);
    json_decref(back);
    FUZZ_CHECK(again != NULL, "json_dumps failed");
    struct remat_profile *p2 = remat_profile_parse(again, strlen(again), NULL, &es);
    FUZZ_CHECK(p2 != NULL, "its own output refused: %s at %s", es.message, es.pointer);
    same_profile(ps, p2, "written and read again");
    free(again);
    remat_profile_free(p2);
    remat_profile_free(pt);
    remat_profile_free(ps);
    return 0;
}
