/* torchpickle.c - the top-level children of a pickled TorchScript module
 * (torchpickle.h). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torchpickle.h"

/* The stack and memo limits: a module's pickle nests a few levels per
 * submodule and memoizes each string, class and object once, numbering
 * them in order (MobileNetV2's 30 KB data.pkl holds 1,269).  At most
 * 1.2 MB of stack and 12 MB of memo, whatever the text. */
#define MAX_STACK 100000
#define MAX_MEMO (1u << 20)

enum kind { K_MARK, K_STR, K_CLASS, K_OBJ, K_DICT, K_OTHER };

struct item {
    uint8_t kind;
    uint8_t torch;      /* K_CLASS, K_OBJ: a class of __torch__ (a module's) */
    uint8_t root_state; /* K_DICT: the dict the root object is built from */
    uint32_t off, len;  /* K_STR: the text in the pickle (at most 4 MiB) */
};

struct scan {
    const unsigned char *p;
    size_t n, at;
    struct item *stack;
    size_t depth;
    struct item *memo;
    size_t memo_len;  /* room */
    size_t memo_used; /* indices set, for MEMOIZE */
    json_t *names;
    int built; /* the root object got its dict */
};

static int push(struct scan *s, struct item it)
{
    if (s->depth == MAX_STACK)
        return -1;
    s->stack[s->depth++] = it;
    return 0;
}

static int push_kind(struct scan *s, enum kind k)
{
    return push(s, (struct item){.kind = (uint8_t)k});
}

static int pop(struct scan *s, struct item *out)
{
    if (s->depth == 0 || s->stack[s->depth - 1].kind == K_MARK)
        return -1;
    *out = s->stack[--s->depth];
    return 0;
}

/* The index of the topmost mark, or -1. */
static long find_mark(const struct scan *s)
{
    for (size_t i = s->depth; i > 0; i--)
        if (s->stack[i - 1].kind == K_MARK)
            return (long)(i - 1);
    return -1;
}

/* Reads k bytes as a little-endian number. */
static int take(struct scan *s, size_t k, uint64_t *v)
{
    if (s->n - s->at < k)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < k; i++)
        x |= (uint64_t)s->p[s->at + i] << (8 * i);
    s->at += k;
    *v = x;
    return 0;
}

/* Skips len bytes of data, giving where they start. */
static int skip(struct scan *s, uint64_t len, size_t *off)
{
    if (len > s->n - s->at)
        return -1;
    *off = s->at;
    s->at += (size_t)len;
    return 0;
}

/* A text line (GLOBAL's module and name, PUT's index): where it starts and
 * its length, the newline skipped. */
static int line(struct scan *s, size_t *off, size_t *len)
{
    const unsigned char *nl = memchr(s->p + s->at, '\n', s->n - s->at);
    if (nl == NULL)
        return -1;
    *off = s->at;
    *len = (size_t)(nl - (s->p + s->at));
    s->at += *len + 1;
    return 0;
}

static int is_torch_module(const unsigned char *m, size_t len)
{
    static const char torch[] = "__torch__", classes[] = "__torch__.torch.classes";
    if (len < sizeof torch - 1 || memcmp(m, torch, sizeof torch - 1) != 0 ||
        (len > sizeof torch - 1 && m[sizeof torch - 1] != '.'))
        return 0;
    /* Bound C++ classes (torch.classes) are objects, not modules. */
    return !(len >= sizeof classes - 1 && memcmp(m, classes, sizeof classes - 1) == 0);
}

static int memo_put(struct scan *s, uint64_t idx)
{
    /* Picklers number memo entries in order (Python's len(memo), torch's
     * memo_id_++): an index past the next one is refused rather than
     * grown to, so the memo never holds more than the text has put. */
    if (s->depth == 0 || s->stack[s->depth - 1].kind == K_MARK || idx >= MAX_MEMO ||
        idx > s->memo_used)
        return -1;
    if (idx >= s->memo_len) {
        size_t cap = s->memo_len ? s->memo_len : 64;
        while (cap <= idx)
            cap *= 2;
        struct item *m = realloc(s->memo, cap * sizeof *m);
        if (m == NULL)
            return -1;
        for (size_t i = s->memo_len; i < cap; i++)
            m[i] = (struct item){.kind = K_MARK}; /* unset */
        s->memo = m;
        s->memo_len = cap;
    }
    if (s->memo[idx].kind == K_MARK)
        s->memo_used++;
    s->memo[idx] = s->stack[s->depth - 1];
    return 0;
}

static int memo_get(struct scan *s, uint64_t idx)
{
    if (idx >= s->memo_len || s->memo[idx].kind == K_MARK)
        return -1;
    return push(s, s->memo[idx]);
}

/* The pairs above stack[from] go into the dict at stack[from - 1]; those
 * of the root's dict with an object of a __torch__ class as value name a
 * child. */
static int set_items(struct scan *s, size_t from)
{
    if (from == 0 || (s->depth - from) % 2 != 0)
        return -1;
    const struct item *d = &s->stack[from - 1];
    if (d->kind != K_DICT)
        return -1;
    for (size_t i = from; d->root_state && i < s->depth; i += 2) {
        const struct item *k = &s->stack[i], *v = &s->stack[i + 1];
        if (v->kind != K_OBJ || !v->torch)
            continue;
        if (k->kind != K_STR || json_array_size(s->names) == REMATD_PICKLE_MAX_CHILDREN)
            return -1;
        json_t *name = json_stringn((const char *)s->p + k->off, k->len);
        if (name == NULL || json_array_append_new(s->names, name) < 0)
            return -1;
    }
    s->depth = from;
    return 0;
}

/* One opcode; 1 at STOP. */
static int step(struct scan *s)
{
    uint64_t v;
    size_t off, len;
    struct item a, b;
    long mark;
    if (s->at >= s->n)
        return -1;
    unsigned char op = s->p[s->at++];
    switch (op) {
    case 0x80: /* PROTO */
        return take(s, 1, &v) < 0 || v > 5 ? -1 : 0;
    case 0x95: /* FRAME */
        return take(s, 8, &v);
    case '.': /* STOP */
        return 1;
    case '(': /* MARK */
        return push_kind(s, K_MARK);
    case 'c': { /* GLOBAL module\nname\n */
        size_t mo, ml;
        if (line(s, &mo, &ml) < 0 || line(s, &off, &len) < 0)
            return -1;
        return push(
            s, (struct item){.kind = K_CLASS, .torch = (uint8_t)is_torch_module(s->p + mo, ml)});
    }
    case 0x93: /* STACK_GLOBAL */
        if (pop(s, &b) < 0 || pop(s, &a) < 0 || a.kind != K_STR || b.kind != K_STR)
            return -1;
        return push(s, (struct item){.kind = K_CLASS,
                                     .torch = (uint8_t)is_torch_module(s->p + a.off, a.len)});
    case 0x81: /* NEWOBJ: cls args */
        if (pop(s, &b) < 0 || pop(s, &a) < 0 || a.kind != K_CLASS)
            return -1;
        return push(s, (struct item){.kind = K_OBJ, .torch = a.torch});
    case 'b': /* BUILD: obj state */
        if (pop(s, &b) < 0 || s->depth == 0 || s->stack[s->depth - 1].kind == K_MARK)
            return -1;
        if (b.root_state)
            s->built = s->depth == 1;
        return 0;
    case 'R': /* REDUCE: callable args */
        if (pop(s, &b) < 0 || pop(s, &a) < 0)
            return -1;
        return push_kind(s, K_OTHER);
    case 'Q': /* BINPERSID */
        if (pop(s, &a) < 0)
            return -1;
        return push_kind(s, K_OTHER);
    case '}': /* EMPTY_DICT */
        /* The root object's dict: pushed right above it. */
        return push(s, (struct item){.kind = K_DICT,
                                     .root_state = s->depth == 1 && s->stack[0].kind == K_OBJ &&
                                                   s->stack[0].torch && !s->built});
    case ']':  /* EMPTY_LIST */
    case ')':  /* EMPTY_TUPLE */
    case 0x8f: /* EMPTY_SET */
    case 'N':  /* NONE */
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        return push_kind(s, K_OTHER);
    case 'J': /* BININT */
        return take(s, 4, &v) < 0 ? -1 : push_kind(s, K_OTHER);
    case 'K': /* BININT1 */
        return take(s, 1, &v) < 0 ? -1 : push_kind(s, K_OTHER);
    case 'M': /* BININT2 */
        return take(s, 2, &v) < 0 ? -1 : push_kind(s, K_OTHER);
    case 'G': /* BINFLOAT */
        return take(s, 8, &v) < 0 ? -1 : push_kind(s, K_OTHER);
    case 0x8a: /* LONG1 */
        return take(s, 1, &v) < 0 || skip(s, v, &off) < 0 ? -1 : push_kind(s, K_OTHER);
    case 0x8b: /* LONG4 */
        return take(s, 4, &v) < 0 || skip(s, v, &off) < 0 ? -1 : push_kind(s, K_OTHER);
    case 'I': /* INT, LONG, FLOAT: text lines */
    case 'L':
    case 'F':
        return line(s, &off, &len) < 0 ? -1 : push_kind(s, K_OTHER);
    case 'X':  /* BINUNICODE */
    case 0x8c: /* SHORT_BINUNICODE */
    case 0x8d: /* BINUNICODE8 */
        if (take(s, op == 'X' ? 4 : op == 0x8c ? 1 : 8, &v) < 0 || skip(s, v, &off) < 0)
            return -1;
        return push(s, (struct item){.kind = K_STR, .off = (uint32_t)off, .len = (uint32_t)v});
    case 'T': /* BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8 */
    case 'U':
    case 'B':
    case 'C':
    case 0x8e:
        if (take(s,
                 op == 'T' || op == 'B' ? 4
                 : op == 0x8e           ? 8
                                        : 1,
                 &v) < 0 ||
            skip(s, v, &off) < 0)
            return -1;
        return push_kind(s, K_OTHER);
    case 'q': /* BINPUT */
        return take(s, 1, &v) < 0 ? -1 : memo_put(s, v);
    case 'r': /* LONG_BINPUT */
        return take(s, 4, &v) < 0 ? -1 : memo_put(s, v);
    case 0x94: /* MEMOIZE */
        return memo_put(s, s->memo_used);
    case 'h': /* BINGET */
        return take(s, 1, &v) < 0 ? -1 : memo_get(s, v);
    case 'j': /* LONG_BINGET */
        return take(s, 4, &v) < 0 ? -1 : memo_get(s, v);
    case 'p': /* PUT, GET: a decimal index on a line */
    case 'g': {
        if (line(s, &off, &len) < 0 || len == 0 || len > 9)
            return -1;
        v = 0;
        for (size_t i = 0; i < len; i++) {
            if (s->p[off + i] < '0' || s->p[off + i] > '9')
                return -1;
            v = v * 10 + (s->p[off + i] - '0');
        }
        return op == 'p' ? memo_put(s, v) : memo_get(s, v);
    }
    case '0': /* POP */
        return pop(s, &a);
    case '2': /* DUP */
        if (s->depth == 0 || s->stack[s->depth - 1].kind == K_MARK)
            return -1;
        return push(s, s->stack[s->depth - 1]);
    case 0x85: /* TUPLE1..3 */
    case 0x86:
    case 0x87:
        for (int k = op - 0x84; k > 0; k--)
            if (pop(s, &a) < 0)
                return -1;
        return push_kind(s, K_OTHER);
    case 'a': /* APPEND */
        if (pop(s, &a) < 0 || s->depth == 0 || s->stack[s->depth - 1].kind == K_MARK)
            return -1;
        return 0;
    case 's': /* SETITEM */
        if (s->depth < 3)
            return -1;
        return set_items(s, s->depth - 2);
    case 'u': /* SETITEMS */
        if ((mark = find_mark(s)) < 0)
            return -1;
        /* The mark itself goes: the pairs then sit right above the dict. */
        memmove(&s->stack[mark], &s->stack[mark + 1],
                (s->depth - (size_t)mark - 1) * sizeof *s->stack);
        s->depth--;
        return set_items(s, (size_t)mark);
    case 't': /* TUPLE, LIST, DICT, FROZENSET: the items above the mark */
    case 'l':
    case 'd':
    case 0x91:
    case 'e': /* APPENDS, ADDITEMS: into the list or set below the mark */
    case 0x90:
    case '1': /* POP_MARK */
        if ((mark = find_mark(s)) < 0)
            return -1;
        s->depth = (size_t)mark;
        if (op == 'e' || op == 0x90)
            return s->depth > 0 && s->stack[s->depth - 1].kind != K_MARK ? 0 : -1;
        return op == '1' ? 0 : push_kind(s, K_OTHER);
    default:
        return -1;
    }
}

json_t *rematd_pickle_children(const unsigned char *p, size_t n)
{
    if (n > REMATD_PICKLE_MAX_BYTES)
        return NULL;
    struct scan s = {.p = p, .n = n, .names = json_array()};
    s.stack = malloc(MAX_STACK * sizeof *s.stack);
    int rc = s.names != NULL && s.stack != NULL ? 0 : -1;
    /* The root: an object of a __torch__ class, first thing in the text. */
    if (rc == 0 && (n < 3 || p[0] != 0x80 || p[2] != 'c'))
        rc = -1;
    while (rc == 0)
        rc = step(&s);
    int good = rc == 1 && s.built && s.depth == 1 && s.stack[0].kind == K_OBJ && s.stack[0].torch;
    free(s.stack);
    free(s.memo);
    if (!good) {
        json_decref(s.names);
        return NULL;
    }
    return s.names;
}
