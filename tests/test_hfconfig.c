/* test_hfconfig - a Hugging Face config.json read by src/rematx/hfconfig.h:
 * the parameter counts Hugging Face's own models have (GPT-2 small,
 * Llama-3-8B, a tied Llama, Qwen2 with its q/k/v bias), the normalised
 * config read back to the same model, and every refusal naming its field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rematx/rematx.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (v == NULL)
        fail_msg("bad test JSON: %s", e.text);
    return v;
}

/* Reads text, which must be accepted, and returns its parameter count after
 * checking that the normalised config reads back to the same count. */
static int64_t params_of(const char *text, struct rematx_hf *h)
{
    json_t *cfg = parse(text);
    struct remat_error err = {0};
    int rc = rematx_hf_read(cfg, "/hf_config", h, &err);
    if (rc != REMAT_OK)
        fail_msg("refused: %s: %s", err.pointer, err.message);
    int64_t n = rematx_hf_params(h);
    json_t *norm = rematx_hf_json(h);
    assert_non_null(norm);
    struct rematx_hf h2;
    assert_int_equal(rematx_hf_read(norm, "/hf_config", &h2, &err), REMAT_OK);
    assert_int_equal(rematx_hf_params(&h2), n);
    assert_memory_equal(h, &h2, sizeof h2);
    json_decref(norm);
    json_decref(cfg);
    return n;
}

/* GPT-2 small's config.json as the Hub has it (openai-community/gpt2). */
static const char gpt2_small[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],"
    " \"attn_pdrop\": 0.1, \"bos_token_id\": 50256, \"embd_pdrop\": 0.1,"
    " \"eos_token_id\": 50256, \"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05,"
    " \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12,"
    " \"n_layer\": 12, \"n_positions\": 1024, \"resid_pdrop\": 0.1,"
    " \"summary_activation\": null, \"summary_first_dropout\": 0.1,"
    " \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\","
    " \"summary_use_proj\": true, \"task_specific_params\": {\"text-generation\":"
    " {\"do_sample\": true, \"max_length\": 50}}, \"vocab_size\": 50257}";

/* Llama-3-8B's (meta-llama/Meta-Llama-3-8B). */
static const char llama3_8b[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false,"
    " \"attention_dropout\": 0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 14336, \"max_position_embeddings\": 8192,"
    " \"model_type\": \"llama\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
    " \"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,"
    " \"rope_scaling\": null, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.0.dev0\","
    " \"use_cache\": true, \"vocab_size\": 128256}";

static void gpt2_small_count(void **state)
{
    (void)state;
    struct rematx_hf h;
    assert_int_equal(params_of(gpt2_small, &h), 124439808);
    assert_int_equal(h.family, REMATX_HF_GPT2);
    assert_int_equal(h.intermediate, 3072);
    assert_true(h.tied && h.gelu_tanh);
    assert_true(h.embd_pdrop == 0.1);
}

static void llama3_8b_count(void **state)
{
    (void)state;
    struct rematx_hf h;
    assert_int_equal(params_of(llama3_8b, &h), 8030261248LL);
    assert_int_equal(h.head_dim, 128);
    assert_int_equal(h.kv_heads, 8);
    assert_false(h.tied);
    assert_int_equal(rematx_hf_embedding_params(&h) + 32 * rematx_hf_block_params(&h) +
                         rematx_hf_head_params(&h),
                     8030261248LL);
}

/* Llama-3.2-1B's shape, tied (meta-llama/Llama-3.2-1B without its
 * rope_scaling): 1,235,814,400 as Hugging Face counts it. */
static void llama_tied_count(void **state)
{
    (void)state;
    struct rematx_hf h;
    assert_int_equal(
        params_of("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 2048,"
                  " \"intermediate_size\": 8192, \"num_attention_heads\": 32,"
                  " \"num_key_value_heads\": 8, \"num_hidden_layers\": 16, \"vocab_size\": 128256,"
                  " \"head_dim\": 64, \"tie_word_embeddings\": true, \"rope_theta\": 500000.0}",
                  &h),
        1235814400LL);
    assert_true(h.tied);
    /* Untied, the head adds one vocab x hidden matrix. */
    h.tied = 0;
    assert_int_equal(rematx_hf_params(&h), 1235814400LL + 128256LL * 2048);
}

/* Qwen2-0.5B (Qwen/Qwen2-0.5B): q, k and v have a bias, o has none; tied;
 * 494,032,768 as Hugging Face counts it. */
static void qwen2_bias_count(void **state)
{
    (void)state;
    struct rematx_hf h;
    assert_int_equal(
        params_of("{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0,"
                  " \"bos_token_id\": 151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\","
                  " \"hidden_size\": 896, \"initializer_range\": 0.02,"
                  " \"intermediate_size\": 4864, \"max_position_embeddings\": 131072,"
                  " \"max_window_layers\": 24, \"model_type\": \"qwen2\","
                  " \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
                  " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
                  " \"sliding_window\": 131072, \"tie_word_embeddings\": true,"
                  " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\","
                  " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}",
                  &h),
        494032768LL);
    assert_true(h.qkv_bias && !h.o_bias);
    assert_int_equal(h.sliding_window, 0);
    /* The bias is q + k + v's widths per block: 896 + 2 * 128. */
    h.qkv_bias = 0;
    assert_int_equal(rematx_hf_params(&h), 494032768LL - 24 * (896 + 2 * 128));
}

/* A Llama with attention_bias: q, k, v and o each get one. */
static void llama_attention_bias(void **state)
{
    (void)state;
    struct rematx_hf h;
    const char *base = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": "
                       "128, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                       "\"num_hidden_layers\": 2, \"vocab_size\": 1000%s}";
    char text[512];
    snprintf(text, sizeof text, base, "");
    int64_t plain = params_of(text, &h);
    /* 1000*64 twice, 2 blocks of (64*64*2 + 2*64*32 + 3*64*128 + 2*64), the norm. */
    assert_int_equal(plain, 2 * 64000 + 2 * (8192 + 4096 + 24576 + 128) + 64);
    snprintf(text, sizeof text, base, ", \"attention_bias\": true");
    assert_int_equal(params_of(text, &h), plain + 2 * (64 + 2 * 32 + 64));
}

/* A refusal: the code and the pointer it names. */
static void refused(const char *text, int code, const char *pointer)
{
    json_t *cfg = parse(text);
    struct rematx_hf h;
    struct remat_error err = {0};
    int rc = rematx_hf_read(cfg, "/hf_config", &h, &err);
    json_decref(cfg);
    if (rc != code || strcmp(err.pointer, pointer) != 0)
        fail_msg("%s: got %d at %s (%s), wanted %d at %s", text, rc, err.pointer, err.message, code,
                 pointer);
    assert_true(strlen(err.message) > 0);
}

#define LLAMA(extra)                                                                               \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": "     \
    "128, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 1000" extra "}"
#define GPT2(extra)                                                                                \
    "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, "                   \
    "\"vocab_size\": 1000" extra "}"

static void refusals(void **state)
{
    (void)state;
    int U = REMAT_EUNSUPPORTED, I = REMAT_EINVAL;
    refused("[1]", I, "/hf_config");
    refused("{\"hidden_size\": 64}", I, "/hf_config/architectures");
    refused("{\"architectures\": [\"T5ForConditionalGeneration\"]}", U,
            "/hf_config/architectures/0");
    refused("{\"model_type\": \"mixtral\"}", U, "/hf_config/model_type");
    refused("{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"llama\"}", I,
            "/hf_config/model_type");
    refused(LLAMA(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}"), U,
            "/hf_config/rope_scaling/rope_type");
    refused(LLAMA(", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}"), U,
            "/hf_config/rope_scaling/type");
    refused(LLAMA(", \"mlp_bias\": true"), U, "/hf_config/mlp_bias");
    refused(LLAMA(", \"num_experts\": 8"), U, "/hf_config/num_experts");
    refused(LLAMA(", \"num_local_experts\": 8"), U, "/hf_config/num_local_experts");
    refused(LLAMA(", \"pretraining_tp\": 2"), U, "/hf_config/pretraining_tp");
    refused(LLAMA(", \"hidden_act\": \"gelu\""), U, "/hf_config/hidden_act");
    refused(LLAMA(", \"sliding_window\": 4096"), U, "/hf_config/sliding_window");
    refused(LLAMA(", \"num_key_value_heads\": 3"), I, "/hf_config/num_key_value_heads");
    refused(LLAMA(", \"head_dim\": 15"), I, "/hf_config/head_dim");
    refused(LLAMA(", \"rms_norm_eps\": 0"), I, "/hf_config/rms_norm_eps");
    refused(LLAMA(", \"tie_word_embeddings\": 1"), I, "/hf_config/tie_word_embeddings");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64}", I, "/hf_config/intermediate_size");
    refused(LLAMA(", \"hidden_size\": 0"), I, "/hf_config/hidden_size");
    refused("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 128, "
            "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 1000, "
            "\"attention_bias\": true}",
            U, "/hf_config/attention_bias");
    refused(GPT2(", \"activation_function\": \"relu\""), U, "/hf_config/activation_function");
    refused(GPT2(", \"scale_attn_by_inverse_layer_idx\": true"), U,
            "/hf_config/scale_attn_by_inverse_layer_idx");
    refused(GPT2(", \"reorder_and_upcast_attn\": true"), U, "/hf_config/reorder_and_upcast_attn");
    refused(GPT2(", \"tie_word_embeddings\": false"), U, "/hf_config/tie_word_embeddings");
    refused(GPT2(", \"n_head\": 5"), I, "/hf_config/n_head");
    refused(GPT2(", \"rotary_dim\": 64"), U, "/hf_config/rotary_dim");
}

/* Mistral's window and Qwen2's, when on, are kept for the seq_len check. */
static void sliding_windows(void **state)
{
    (void)state;
    struct rematx_hf h;
    params_of("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"intermediate_size\": 128, "
              "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"num_hidden_layers\": 2, "
              "\"vocab_size\": 1000, \"sliding_window\": 4096}",
              &h);
    assert_int_equal(h.sliding_window, 4096);
    assert_false(h.qkv_bias || h.o_bias);
    params_of("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 128, "
              "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 1000, "
              "\"use_sliding_window\": true, \"sliding_window\": 256}",
              &h);
    assert_int_equal(h.sliding_window, 256);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_small_count),     cmocka_unit_test(llama3_8b_count),
        cmocka_unit_test(llama_tied_count),     cmocka_unit_test(qwen2_bias_count),
        cmocka_unit_test(llama_attention_bias), cmocka_unit_test(refusals),
        cmocka_unit_test(sliding_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
