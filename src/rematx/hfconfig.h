/* hfconfig.h - a transformer from its Hugging Face config.json, written
 * once: rematd reads a request's hf_config with it (strictly: an
 * architecture or a field that changes the computation and that remat does
 * not build is refused, named), and remat-worker reads the normalised spec
 * with it again before building the modules (worker/hf.cpp), so the two
 * agree on what a config means.  The parameter count is here too, pure,
 * and the worker asserts its built module has exactly that many.
 *
 * Two families: Llama (LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM: RMSNorm, rotary embeddings, grouped-query attention,
 * SwiGLU) and GPT-2 (GPT2LMHeadModel: learned positions, LayerNorm,
 * gelu_new MLP, tied head).  docs/models.md, "From a Hugging Face config". */
#ifndef REMATX_HFCONFIG_H
#define REMATX_HFCONFIG_H

#include <stdint.h>

#include <jansson.h>

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rematx_hf_family { REMATX_HF_LLAMA, REMATX_HF_GPT2 };

/* The most decoder blocks, and the bounds of the widths, a config may give. */
#define REMATX_HF_MAX_LAYERS 1024
#define REMATX_HF_MAX_HIDDEN 65536
#define REMATX_HF_MAX_VOCAB (1 << 20)

struct rematx_hf {
    enum rematx_hf_family family;
    const char *architecture; /* "LlamaForCausalLM", ...: static storage */
    const char *model_type;   /* "llama", "mistral", "qwen2", "gpt2" */
    int64_t hidden, intermediate, heads, kv_heads, layers, vocab, head_dim, max_positions;
    int tied;      /* the head's weight is the token embedding's */
    int qkv_bias;  /* q, k and v projections have a bias */
    int o_bias;    /* the output projection has a bias (Llama's attention_bias) */
    int gelu_tanh; /* GPT-2: gelu_new (tanh approximation), else exact gelu */
    double norm_eps, rope_theta;
    /* Dropout probabilities, applied in training as the config says:
     * GPT-2's embd/attn/resid_pdrop, Llama's attention_dropout. */
    double embd_pdrop, attn_pdrop, resid_pdrop;
    /* A sliding-window attention's width (Mistral's sliding_window), 0 when
     * none: it changes nothing while the sequence fits in the window. */
    int64_t sliding_window;
};

/* Reads and checks a config.json object into h (err may be NULL).  prefix is the JSON
 * pointer of the object in the request ("/hf_config"): err's pointer names
 * the field at fault under it.  REMAT_OK, REMAT_EINVAL (a missing field, a
 * value of the wrong kind or out of its bounds) or REMAT_EUNSUPPORTED (an
 * architecture, or a field that changes the computation, that remat does
 * not build). */
int rematx_hf_read(const json_t *cfg, const char *prefix, struct rematx_hf *h,
                   struct remat_error *err);

/* The parameter count Hugging Face's model of that config has (tied
 * weights once): 124439808 for GPT-2 small, 8030261248 for Llama-3-8B. */
int64_t rematx_hf_params(const struct rematx_hf *h);
/* The parameters of one decoder block, of the token and position
 * embeddings, and of the final norm with the head (0 for a tied head's
 * weight, which is the embedding's): their sum with layers blocks is
 * rematx_hf_params. */
int64_t rematx_hf_block_params(const struct rematx_hf *h);
int64_t rematx_hf_embedding_params(const struct rematx_hf *h);
int64_t rematx_hf_head_params(const struct rematx_hf *h);

/* The normalised config: every field that changes the computation, named as
 * the family's config.json names it, nothing else (so that two configs that
 * differ in harmless fields make the same profile spec and reuse key).
 * rematx_hf_read reads it back to the same h.  New, or NULL when out of
 * memory. */
json_t *rematx_hf_json(const struct rematx_hf *h);

#ifdef __cplusplus
}
#endif

#endif
