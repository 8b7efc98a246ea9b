/*
 * hfconfig.c - a Hugging Face config.json read strictly (hfconfig.h).
 *
 * Every member of the object is one of three kinds: read (it sets a number
 * of struct rematx_hf, within bounds), pinned (remat builds one value of it,
 * the one Hugging Face's model uses by default, and refuses another: a
 * rope_scaling with a type, mlp_bias true), or harmless (it changes no
 * tensor of a training step: token ids, the dtype the weights were saved
 * in, the transformers version).  Anything else is refused by name: a field
 * remat does not know may change the computation (num_experts,
 * num_local_experts), and a plan for another model than the one described
 * is worse than no plan.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rematx/error.h"
#include "rematx/hfconfig.h"
#include "rematx/layers.h"

struct arch {
    const char *architecture, *model_type;
    enum rematx_hf_family family;
    int64_t max_positions; /* the family's default max_position_embeddings */
};

static const struct arch archs[] = {
    {"LlamaForCausalLM", "llama", REMATX_HF_LLAMA, 2048},
    {"MistralForCausalLM", "mistral", REMATX_HF_LLAMA, 4096 * 32},
    {"Qwen2ForCausalLM", "qwen2", REMATX_HF_LLAMA, 32768},
    {"GPT2LMHeadModel", "gpt2", REMATX_HF_GPT2, 1024},
};
#define N_ARCHS (sizeof archs / sizeof archs[0])

/* Members that change no tensor of a training step, in either family. */
static const char *const harmless[] = {"torch_dtype",
                                       "dtype",
                                       "transformers_version",
                                       "bos_token_id",
                                       "eos_token_id",
                                       "pad_token_id",
                                       "use_cache",
                                       "initializer_range",
                                       "_name_or_path",
                                       "tokenizer_class",
                                       "return_dict",
                                       "output_attentions",
                                       "output_hidden_states",
                                       "torchscript",
                                       "id2label",
                                       "label2id",
                                       "task_specific_params",
                                       "_attn_implementation_autoset",
                                       "architectures",
                                       "model_type",
                                       NULL};
/* GPT-2's own: n_ctx is n_positions' old name, the summary_* fields
 * configure a sequence-classification head that GPT2LMHeadModel has not. */
static const char *const harmless_gpt2[] = {"n_ctx",
                                            "summary_type",
                                            "summary_use_proj",
                                            "summary_activation",
                                            "summary_proj_to_labels",
                                            "summary_first_dropout",
                                            NULL};
/* Qwen2's: which layers would use the window, moot while it is off. */
static const char *const harmless_qwen2[] = {"max_window_layers", NULL};

static int in(const char *const *list, const char *k)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], k) == 0)
            return 1;
    return 0;
}

struct reader {
    const json_t *cfg;
    const char *prefix;
    struct remat_error *err;
};

static int fail(const struct reader *r, int code, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(const struct reader *r, int code, const char *key, const char *fmt, ...)
{
    char p[128];
    snprintf(p, sizeof p, "%.80s/%.40s", r->prefix, key);
    va_list ap;
    va_start(ap, fmt);
    int rc = rematx_verror(r->err, code, p, fmt, ap);
    va_end(ap);
    return rc;
}

/* An integer member in lo..hi; dflt when absent or null (-1: required). */
static int get_int(const struct reader *r, const char *key, int64_t lo, int64_t hi, int64_t dflt,
                   int64_t *out)
{
    const json_t *v = json_object_get(r->cfg, key);
    if (v == NULL || json_is_null(v)) {
        if (dflt < 0)
            return fail(r, REMAT_EINVAL, key, "%s is required", key);
        *out = dflt;
        return REMAT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be an integer in %lld..%lld", key, (long long)lo,
                 (long long)hi);
        return fail(r, REMAT_EINVAL, key, "%s", msg);
    }
    *out = json_integer_value(v);
    return REMAT_OK;
}

/* A number member in (lo, hi) or [lo, hi) when lo_closed; dflt when absent. */
static int get_num(const struct reader *r, const char *key, double lo, int lo_closed, double hi,
                   double dflt, double *out)
{
    const json_t *v = json_object_get(r->cfg, key);
    if (v == NULL || json_is_null(v)) {
        *out = dflt;
        return REMAT_OK;
    }
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x) || x >= hi || x < lo || (!lo_closed && x == lo)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a number in %s%g, %g)", key, lo_closed ? "[" : "(",
                 lo, hi);
        return fail(r, REMAT_EINVAL, key, "%s", msg);
    }
    *out = x;
    return REMAT_OK;
}

static int get_bool(const struct reader *r, const char *key, int dflt, int *out)
{
    const json_t *v = json_object_get(r->cfg, key);
    if (v == NULL || json_is_null(v)) {
        *out = dflt;
        return REMAT_OK;
    }
    if (!json_is_boolean(v))
        return fail(r, REMAT_EINVAL, key, "%s must be true or false", key);
    *out = json_is_true(v);
    return REMAT_OK;
}

/* A boolean remat builds one value of: another is unsupported. */
static int pin_bool(const struct reader *r, const char *key, int want, const char *why)
{
    int b = want;
    int rc = get_bool(r, key, want, &b);
    if (rc != REMAT_OK)
        return rc;
    if (b != want)
        return fail(r, REMAT_EUNSUPPORTED, key, "%s", why);
    return REMAT_OK;
}

/* The architecture: architectures (one name) and model_type, either or
 * both, agreeing. */
static const struct arch *find_arch(const struct reader *r)
{
    const json_t *as = json_object_get(r->cfg, "architectures");
    const json_t *mt = json_object_get(r->cfg, "model_type");
    const struct arch *a = NULL;
    static const char *const names =
        "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or GPT2LMHeadModel";
    if (as != NULL) {
        const char *n = json_string_value(json_array_get(as, 0));
        if (!json_is_array(as) || json_array_size(as) != 1 || n == NULL) {
            fail(r, REMAT_EINVAL, "architectures", "architectures must be a list of one name, %s",
                 names);
            return NULL;
        }
        for (size_t i = 0; i < N_ARCHS && !a; i++)
            if (strcmp(archs[i].architecture, n) == 0)
                a = &archs[i];
        if (a == NULL) {
            char msg[200];
            snprintf(msg, sizeof msg, "architecture %.60s is not one remat builds: %s", n, names);
            fail(r, REMAT_EUNSUPPORTED, "architectures/0", "%s", msg);
            return NULL;
        }
    }
    if (mt != NULL) {
        const char *n = json_string_value(mt);
        const struct arch *b = NULL;
        for (size_t i = 0; n && i < N_ARCHS && !b; i++)
            if (strcmp(archs[i].model_type, n) == 0)
                b = &archs[i];
        if (b == NULL) {
            fail(r, json_is_string(mt) ? REMAT_EUNSUPPORTED : REMAT_EINVAL, "model_type",
                 "model_type must be llama, mistral, qwen2 or gpt2");
            return NULL;
        }
        if (a != NULL && a != b) {
            fail(r, REMAT_EINVAL, "model_type", "model_type %s does not match architectures", n);
            return NULL;
        }
        a = b;
    }
    if (a == NULL)
        fail(r, REMAT_EINVAL, "architectures", "a config names its architecture: %s", names);
    return a;
}

static int read_llama(const struct reader *r, const struct arch *a, struct rematx_hf *h)
{
    int rc;
    int qwen2 = strcmp(a->model_type, "qwen2") == 0, llama = strcmp(a->model_type, "llama") == 0;
    if ((rc = get_int(r, "hidden_size", 1, REMATX_HF_MAX_HIDDEN, -1, &h->hidden)) ||
        (rc = get_int(r, "intermediate_size", 1, 4 * REMATX_HF_MAX_HIDDEN, -1, &h->intermediate)) ||
        (rc = get_int(r, "num_attention_heads", 1, 1024, -1, &h->heads)) ||
        (rc = get_int(r, "num_key_value_heads", 1, 1024, h->heads, &h->kv_heads)) ||
        (rc = get_int(r, "num_hidden_layers", 1, REMATX_HF_MAX_LAYERS, -1, &h->layers)) ||
        (rc = get_int(r, "vocab_size", 1, REMATX_HF_MAX_VOCAB, -1, &h->vocab)) ||
        (rc = get_int(r, "max_position_embeddings", 1, REMATX_MAX_DIM, a->max_positions,
                      &h->max_positions)) ||
        (rc = get_bool(r, "tie_word_embeddings", 0, &h->tied)) ||
        (rc = get_num(r, "rms_norm_eps", 0, 0, 1, 1e-6, &h->norm_eps)) ||
        (rc = get_num(r, "rope_theta", 0, 0, 1e12, 10000, &h->rope_theta)) ||
        (rc = get_num(r, "attention_dropout", 0, 1, 1, 0, &h->attn_pdrop)))
        return rc;
    if (h->heads % h->kv_heads != 0)
        return fail(r, REMAT_EINVAL, "num_key_value_heads",
                    "num_key_value_heads must divide num_attention_heads");
    int64_t dflt_hd = h->hidden / h->heads;
    if ((rc = get_int(r, "head_dim", 1, 4096, dflt_hd ? dflt_hd : -1, &h->head_dim)))
        return rc;
    if (h->head_dim % 2 != 0)
        return fail(r, REMAT_EINVAL, "head_dim",
                    "head_dim must be even: rotary embeddings turn pairs of features");
    if (!json_object_get(r->cfg, "head_dim") && h->hidden % h->heads != 0)
        return fail(r, REMAT_EINVAL, "num_attention_heads",
                    "num_attention_heads must divide hidden_size (or give head_dim)");
    /* Llama's attention_bias puts a bias on q, k, v and o; Qwen2 always has
     * one on q, k and v and none on o; Mistral has none. */
    if (llama) {
        if ((rc = get_bool(r, "attention_bias", 0, &h->qkv_bias)))
            return rc;
        h->o_bias = h->qkv_bias;
    } else {
        h->qkv_bias = qwen2;
        h->o_bias = 0;
    }
    const json_t *act = json_object_get(r->cfg, "hidden_act");
    if (act != NULL && !(json_is_string(act) && strcmp(json_string_value(act), "silu") == 0))
        return fail(r, REMAT_EUNSUPPORTED, "hidden_act",
                    "hidden_act must be silu: the SwiGLU MLP remat builds");
    if (llama && (rc = pin_bool(r, "mlp_bias", 0, "mlp_bias true is not built (no MLP bias)")))
        return rc;
    const json_t *rs = json_object_get(r->cfg, "rope_scaling");
    if (rs != NULL && !json_is_null(rs))
        return fail(r, REMAT_EUNSUPPORTED,
                    json_object_get(rs, "rope_type") ? "rope_scaling/rope_type"
                    : json_object_get(rs, "type")    ? "rope_scaling/type"
                                                     : "rope_scaling",
                    "rope_scaling is not built: only plain rotary embeddings (rope_scaling "
                    "null)");
    int64_t tp;
    if ((rc = get_int(r, "pretraining_tp", 1, 1, 1, &tp)))
        return fail(r, REMAT_EUNSUPPORTED, "pretraining_tp",
                    "pretraining_tp must be 1: the sliced projections are not built");
    /* A sliding window changes nothing while the sequence fits in it: its
     * width is kept for rematd to compare with seq_len. */
    int use_sw = !qwen2;
    if (qwen2 && (rc = get_bool(r, "use_sliding_window", 0, &use_sw)))
        return rc;
    const json_t *sw = json_object_get(r->cfg, "sliding_window");
    h->sliding_window = 0;
    if (llama && sw != NULL && !json_is_null(sw))
        return fail(r, REMAT_EUNSUPPORTED, "sliding_window", "sliding_window is not a Llama field");
    if (use_sw && sw != NULL && !json_is_null(sw) &&
        (rc = get_int(r, "sliding_window", 1, REMATX_MAX_DIM, 0, &h->sliding_window)))
        return rc;
    if (qwen2 && use_sw && h->sliding_window == 0)
        return fail(r, REMAT_EINVAL, "sliding_window",
                    "use_sliding_window true needs sliding_window");
    static const char *const llama_fields[] = {"hidden_size",
                                               "intermediate_size",
                                               "num_attention_heads",
                                               "num_key_value_heads",
                                               "num_hidden_layers",
                                               "vocab_size",
                                               "max_position_embeddings",
                                               "tie_word_embeddings",
                                               "rms_norm_eps",
                                               "rope_theta",
                                               "attention_dropout",
                                               "head_dim",
                                               "hidden_act",
                                               "rope_scaling",
                                               "pretraining_tp",
                                               "sliding_window",
                                               NULL};
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)r->cfg, key, v) {
        if (in(harmless, key) || in(llama_fields, key) ||
            (llama && (strcmp(key, "attention_bias") == 0 || strcmp(key, "mlp_bias") == 0)) ||
            (qwen2 && (strcmp(key, "use_sliding_window") == 0 || in(harmless_qwen2, key))))
            continue;
        return fail(r, REMAT_EUNSUPPORTED, key,
                    "%s is not a field remat builds for this architecture: it may change the "
                    "computation",
                    key);
    }
    return REMAT_OK;
}

static int read_gpt2(const struct reader *r, struct rematx_hf *h)
{
    int rc;
    if ((rc = get_int(r, "n_embd", 1, REMATX_HF_MAX_HIDDEN, -1, &h->hidden)) ||
        (rc = get_int(r, "n_layer", 1, REMATX_HF_MAX_LAYERS, -1, &h->layers)) ||
        (rc = get_int(r, "n_head", 1, 1024, -1, &h->heads)) ||
        (rc = get_int(r, "vocab_size", 1, REMATX_HF_MAX_VOCAB, -1, &h->vocab)) ||
        (rc = get_int(r, "n_positions", 1, REMATX_MAX_DIM, 1024, &h->max_positions)) ||
        (rc =
             get_int(r, "n_inner", 1, 4 * REMATX_HF_MAX_HIDDEN, 4 * h->hidden, &h->intermediate)) ||
        (rc = get_num(r, "layer_norm_epsilon", 0, 0, 1, 1e-5, &h->norm_eps)) ||
        (rc = get_num(r, "embd_pdrop", 0, 1, 1, 0.1, &h->embd_pdrop)) ||
        (rc = get_num(r, "attn_pdrop", 0, 1, 1, 0.1, &h->attn_pdrop)) ||
        (rc = get_num(r, "resid_pdrop", 0, 1, 1, 0.1, &h->resid_pdrop)))
        return rc;
    if (h->hidden % h->heads != 0)
        return fail(r, REMAT_EINVAL, "n_head", "n_head must divide n_embd");
    h->kv_heads = h->heads;
    h->head_dim = h->hidden / h->heads;
    h->tied = 1;
    h->qkv_bias = h->o_bias = 1;
    const json_t *act = json_object_get(r->cfg, "activation_function");
    const char *an = act ? json_string_value(act) : "gelu_new";
    if (an != NULL && (strcmp(an, "gelu_new") == 0 || strcmp(an, "gelu_pytorch_tanh") == 0))
        h->gelu_tanh = 1;
    else if (an != NULL && strcmp(an, "gelu") == 0)
        h->gelu_tanh = 0;
    else
        return fail(r, REMAT_EUNSUPPORTED, "activation_function",
                    "activation_function must be gelu_new, gelu_pytorch_tanh or gelu");
    if ((rc = pin_bool(r, "scale_attn_weights", 1, "scale_attn_weights false is not built")) ||
        (rc = pin_bool(r, "scale_attn_by_inverse_layer_idx", 0,
                       "scale_attn_by_inverse_layer_idx is not built")) ||
        (rc = pin_bool(r, "reorder_and_upcast_attn", 0,
                       "reorder_and_upcast_attn is not built (it upcasts the scores)")) ||
        (rc = pin_bool(r, "add_cross_attention", 0, "cross-attention is not built")) ||
        (rc = pin_bool(r, "tie_word_embeddings", 1,
                       "GPT2LMHeadModel's head is the token embedding (tied)")))
        return rc;
    static const char *const gpt2_fields[] = {"n_embd",
                                              "n_layer",
                                              "n_head",
                                              "vocab_size",
                                              "n_positions",
                                              "n_inner",
                                              "layer_norm_epsilon",
                                              "embd_pdrop",
                                              "attn_pdrop",
                                              "resid_pdrop",
                                              "activation_function",
                                              "scale_attn_weights",
                                              "scale_attn_by_inverse_layer_idx",
                                              "reorder_and_upcast_attn",
                                              "add_cross_attention",
                                              "tie_word_embeddings",
                                              NULL};
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)r->cfg, key, v) {
        if (in(harmless, key) || in(gpt2_fields, key) || in(harmless_gpt2, key))
            continue;
        return fail(r, REMAT_EUNSUPPORTED, key,
                    "%s is not a field remat builds for GPT-2: it may change the computation", key);
    }
    return REMAT_OK;
}

int rematx_hf_read(const json_t *cfg, const char *prefix, struct rematx_hf *h,
                   struct remat_error *err)
{
    struct remat_error local = {0};
    if (err == NULL)
        err = &local;
    struct reader r = {cfg, prefix ? prefix : "", err};
    memset(h, 0, sizeof *h);
    if (!json_is_object(cfg))
        return rematx_error(err, REMAT_EINVAL, r.prefix,
                            "hf_config must be the object of a config.json");
    const struct arch *a = find_arch(&r);
    if (a == NULL)
        return err->code;
    h->family = a->family;
    h->architecture = a->architecture;
    h->model_type = a->model_type;
    return a->family == REMATX_HF_GPT2 ? read_gpt2(&r, h) : read_llama(&r, a, h);
}

int64_t rematx_hf_block_params(const struct rematx_hf *h)
{
    int64_t d = h->hidden, q = h->heads * h->head_dim, kv = h->kv_heads * h->head_dim;
    if (h->family == REMATX_HF_GPT2)
        /* ln_1, c_attn (d -> 3d), c_proj, ln_2, c_fc (d -> inner), c_proj. */
        return 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d +
               (d * h->intermediate + h->intermediate) + (h->intermediate * d + d);
    int64_t attn = d * q + 2 * d * kv + q * d;
    if (h->qkv_bias)
        attn += q + 2 * kv;
    if (h->o_bias)
        attn += d;
    /* gate, up and down; two RMSNorm weights. */
    return attn + 3 * d * h->intermediate + 2 * d;
}

int64_t rematx_hf_embedding_params(const struct rematx_hf *h)
{
    int64_t n = h->vocab * h->hidden;
    if (h->family == REMATX_HF_GPT2)
        n += h->max_positions * h->hidden;
    return n;
}

int64_t rematx_hf_head_params(const struct rematx_hf *h)
{
    /* The final norm (LayerNorm has a bias, RMSNorm none), and the head's
     * weight unless it is the embedding's. */
    int64_t n = h->family == REMATX_HF_GPT2 ? 2 * h->hidden : h->hidden;
    if (!h->tied)
        n += h->vocab * h->hidden;
    return n;
}

int64_t rematx_hf_params(const struct rematx_hf *h)
{
    return rematx_hf_embedding_params(h) + h->layers * rematx_hf_block_params(h) +
           rematx_hf_head_params(h);
}

json_t *rematx_hf_json(const struct rematx_hf *h)
{
    json_t *o;
    if (h->family == REMATX_HF_GPT2) {
        o = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:f, s:f, s:f, s:f}",
                      "architectures", h->architecture, "model_type", h->model_type, "n_embd",
                      (json_int_t)h->hidden, "n_layer", (json_int_t)h->layers, "n_head",
                      (json_int_t)h->heads, "n_inner", (json_int_t)h->intermediate, "vocab_size",
                      (json_int_t)h->vocab, "n_positions", (json_int_t)h->max_positions,
                      "activation_function", h->gelu_tanh ? "gelu_new" : "gelu",
                      "layer_norm_epsilon", h->norm_eps, "embd_pdrop", h->embd_pdrop, "attn_pdrop",
                      h->attn_pdrop, "resid_pdrop", h->resid_pdrop);
        return o;
    }
    o = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:f, s:f}",
                  "architectures", h->architecture, "model_type", h->model_type, "hidden_size",
                  (json_int_t)h->hidden, "intermediate_size", (json_int_t)h->intermediate,
                  "num_attention_heads", (json_int_t)h->heads, "num_key_value_heads",
                  (json_int_t)h->kv_heads, "num_hidden_layers", (json_int_t)h->layers, "vocab_size",
                  (json_int_t)h->vocab, "head_dim", (json_int_t)h->head_dim,
                  "max_position_embeddings", (json_int_t)h->max_positions, "tie_word_embeddings",
                  h->tied, "rms_norm_eps", h->norm_eps, "rope_theta", h->rope_theta,
                  "attention_dropout", h->attn_pdrop);
    if (o == NULL)
        return NULL;
    int bad = 0;
    if (strcmp(h->model_type, "llama") == 0)
        bad |= json_object_set_new(o, "attention_bias", json_boolean(h->qkv_bias));
    if (h->sliding_window > 0) {
        bad |= json_object_set_new(o, "sliding_window", json_integer(h->sliding_window));
        if (strcmp(h->model_type, "qwen2") == 0)
            bad |= json_object_set_new(o, "use_sliding_window", json_true());
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
