/*
 * solve_mintime_nested.c - the nested segment description of a min-time
 * plan (docs/min-time.md, "Applying a plan"), as plan JSON's
 * "nested_segments".
 *
 * A persistent schedule of the cell (i, l) is a list of items over i..l: a
 * stage run with grad (F_all .. B, the chain option) or a checkpointed
 * segment [i, j-1] (F_ck, F_∅ .. in the forward; its own list, recomputed
 * with grad, in the backward).  Their ops come as the forward parts left to
 * right, then the backward parts right to left, so the parser walks forward
 * pushing items and then pops them, parsing each segment's inner list.
 */
#include <stdlib.h>

#include "solve_mintime.h"

struct seg_parser {
    const struct remat_schedule *s;
    size_t n, pos;
};

static const struct remat_op *peek(const struct seg_parser *sp)
{
    return sp->pos < sp->s->n_ops ? &sp->s->ops[sp->pos] : NULL;
}

static int expect(struct seg_parser *sp, int kind, size_t stage)
{
    const struct remat_op *o = peek(sp);
    if (o == NULL || o->kind != kind || o->stage != stage)
        return -1;
    sp->pos++;
    return 0;
}

static json_t *seg_item(size_t first, size_t last, int checkpoint)
{
    return json_pack("{s:[I,I],s:b}", "stages", (json_int_t)first, (json_int_t)last, "checkpoint",
                     checkpoint);
}

/* Parses the list of cell (i, l) into arr.  Returns 0, -1 when the schedule
 * is not of this shape, -2 when out of memory. */
static int parse_list(struct seg_parser *sp, size_t i, size_t l, json_t *arr)
{
    size_t depth = 0;
    /* Forward parts, pushed as (first stage, last stage or tagged end). */
    size_t *stack = malloc((l - i + 2) * 2 * sizeof(size_t));
    if (stack == NULL)
        return -2;
    int rc = 0;
    while (i <= l) {
        const struct remat_op *o = peek(sp);
        if (o == NULL || o->stage != i) {
            rc = -1;
            break;
        }
        if (o->kind == REMAT_OP_F_ALL) {
            sp->pos++;
            stack[2 * depth] = i;
            stack[2 * depth + 1] = i;
            depth++;
            i++;
        } else if (o->kind == REMAT_OP_F_CK) {
            sp->pos++;
            size_t j = i + 1;
            while (j <= l && expect(sp, REMAT_OP_F_NONE, j) == 0)
                j++;
            if (j > l) {
                rc = -1;
                break;
            }
            stack[2 * depth] = i;
            stack[2 * depth + 1] = j - 1 + (l + 1); /* tagged: a segment [i, j-1] */
            depth++;
            i = j;
        } else {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && l == sp->n && expect(sp, REMAT_OP_LOSS, sp->n) != 0)
        rc = -1;
    /* Items in order, then the backward parts right to left. */
    json_t **items = NULL;
    if (rc == 0 && depth > 0) {
        items = calloc(depth, sizeof(json_t *));
        if (items == NULL)
            rc = -2;
    }
    for (size_t k = depth; rc == 0 && k-- > 0;) {
        size_t a = stack[2 * k], tag = stack[2 * k + 1];
        if (tag <= l) {
            if (expect(sp, REMAT_OP_B, a) != 0) {
                rc = -1;
                break;
            }
            items[k] = seg_item(a, a, 0);
            if (items[k] == NULL)
                rc = -2;
        } else {
            size_t e = tag - (l + 1);
            items[k] = seg_item(a, e, 1);
            json_t *inner = items[k] != NULL ? json_array() : NULL;
            /* json_object_set_new takes inner even when it fails. */
            if (inner == NULL || json_object_set_new(items[k], "inner", inner) != 0) {
                rc = -2;
                break;
            }
            rc = parse_list(sp, a, e, inner);
        }
    }
    /* Merge runs of stages kept with grad into one item. */
    for (size_t k = 0; rc == 0 && k < depth; k++) {
        json_t *it = items[k];
        if (json_is_true(json_object_get(it, "checkpoint"))) {
            if (json_array_append(arr, it) != 0)
                rc = -2;
            continue;
        }
        size_t e = k;
        while (e + 1 < depth && !json_is_true(json_object_get(items[e + 1], "checkpoint")))
            e++;
        json_t *run = seg_item(stack[2 * k], stack[2 * e], 0);
        if (run == NULL || json_array_append_new(arr, run) != 0)
            rc = -2;
        k = e;
    }
    if (items != NULL)
        for (size_t k = 0; k < depth; k++)
            json_decref(items[k]);
    free(items);
    free(stack);
    return rc;
}

json_t *remat__nested_segments_json(const struct remat_profile *p, const struct remat_plan *plan)
{
    json_t *arr = json_array();
    if (arr == NULL)
        return NULL;
    struct seg_parser sp = {&plan->schedule, p->n_stages, 0};
    int rc = p->n_stages > 0 ? parse_list(&sp, 1, p->n_stages, arr) : -1;
    if (rc == 0 && sp.pos != plan->schedule.n_ops)
        rc = -1;
    if (rc == -2) {
        json_decref(arr);
        return NULL;
    }
    if (rc == -1) {
        /* Not a persistent schedule: there is no nesting to describe. */
        json_array_clear(arr);
    }
    return arr;
}
