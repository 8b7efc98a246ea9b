/*
 * hf.cpp - a transformer from its Hugging Face config, built as Hugging
 * Face's transformers builds it for training (docs/models.md, "From a
 * Hugging Face config"): the Llama family (LlamaForCausalLM,
 * MistralForCausalLM, Qwen2ForCausalLM: RMSNorm, rotary embeddings,
 * grouped-query attention, SwiGLU, tied or untied head, q/k/v(/o) bias as
 * the config says) and GPT-2 (learned positions, LayerNorm, gelu_new MLP,
 * dropout, tied head), with random weights.
 *
 * Attention is the "eager" implementation: the scores are materialised
 * (softmax in fp32, as transformers' eager_attention_forward), which is
 * what libtorch 1.13 has; a fused kernel (SDPA, FlashAttention) keeps less
 * for backward.  The config is remat's own numbers, read by
 * src/rematx/hfconfig.c, and the code is this file: such a model runs in
 * the worker's process like a zoo model (docs/security.md).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/core/Reduction.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

#include <cmath>
#include <unordered_set>

#include "hf.h"
#include "shim_private.h"

namespace rw
{

namespace
{

namespace nn = torch::nn;

/* Llama's RMSNorm: the mean square in fp32, the weight applied in the
 * input's dtype (transformers' LlamaRMSNorm). */
struct RmsNormImpl : nn::Module {
    torch::Tensor weight;
    double eps;
    RmsNormImpl(int64_t d, double e) : eps(e)
    {
        weight = register_parameter("weight", torch::ones({d}));
    }
    torch::Tensor forward(torch::Tensor x)
    {
        auto dt = x.scalar_type();
        auto f = x.to(torch::kFloat);
        f = f * torch::rsqrt(f.pow(2).mean(-1, true) + eps);
        return weight * f.to(dt);
    }
};
TORCH_MODULE(RmsNorm);

/* The token embedding, which a tied head shares. */
struct LlamaEmbeddingImpl : nn::Module {
    nn::Embedding tok{nullptr};
    LlamaEmbeddingImpl(int64_t vocab, int64_t d)
    {
        tok = register_module("embed_tokens", nn::Embedding(vocab, d));
    }
    torch::Tensor forward(torch::Tensor ids)
    {
        return tok->forward(ids);
    }
};
TORCH_MODULE(LlamaEmbedding);

torch::Tensor rotate_half(const torch::Tensor &x)
{
    int64_t h = x.size(-1) / 2;
    return torch::cat({-x.slice(-1, h), x.slice(-1, 0, h)}, -1);
}

/* Causal attention on [B, heads, T, hd]: scores materialised, the mask
 * added, softmax in fp32 and back, dropout in training. */
torch::Tensor attend(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v,
                     const torch::Tensor &mask, double pdrop, bool training)
{
    int64_t T = q.size(2);
    auto s = torch::matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt((double)q.size(-1)));
    s = s.masked_fill(mask.slice(0, 0, T).slice(1, 0, T), -INFINITY);
    auto p = torch::softmax(s, -1, torch::kFloat).to(q.scalar_type());
    if (pdrop > 0)
        p = torch::dropout(p, pdrop, training);
    return torch::matmul(p, v);
}

/* A Llama decoder layer: pre-norm grouped-query attention with rotary
 * embeddings, then a pre-norm SwiGLU MLP, each added to the residual. */
struct LlamaBlockImpl : nn::Module {
    RmsNorm ln1{nullptr}, ln2{nullptr};
    nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
    nn::Linear gate{nullptr}, up{nullptr}, down{nullptr};
    torch::Tensor cos, sin, mask;
    int64_t heads, kv_heads, hd;
    double pdrop;
    LlamaBlockImpl(const rematx_hf &h, int64_t seq)
        : heads(h.heads), kv_heads(h.kv_heads), hd(h.head_dim), pdrop(h.attn_pdrop)
    {
        int64_t d = h.hidden;
        ln1 = register_module("input_layernorm", RmsNorm(d, h.norm_eps));
        q = register_module("q_proj",
                            nn::Linear(nn::LinearOptions(d, heads * hd).bias(h.qkv_bias)));
        k = register_module("k_proj",
                            nn::Linear(nn::LinearOptions(d, kv_heads * hd).bias(h.qkv_bias)));
        v = register_module("v_proj",
                            nn::Linear(nn::LinearOptions(d, kv_heads * hd).bias(h.qkv_bias)));
        o = register_module("o_proj", nn::Linear(nn::LinearOptions(heads * hd, d).bias(h.o_bias)));
        ln2 = register_module("post_attention_layernorm", RmsNorm(d, h.norm_eps));
        gate = register_module("gate_proj",
                               nn::Linear(nn::LinearOptions(d, h.intermediate).bias(false)));
        up = register_module("up_proj",
                             nn::Linear(nn::LinearOptions(d, h.intermediate).bias(false)));
        down = register_module("down_proj",
                               nn::Linear(nn::LinearOptions(h.intermediate, d).bias(false)));
        /* The rotary table for positions 0..seq-1, as LlamaRotaryEmbedding
         * computes it (in fp32, then the activations' dtype). */
        auto inv = 1.0 / torch::pow(h.rope_theta, torch::arange(0, hd, 2, torch::kFloat64).div(hd));
        auto f = torch::outer(torch::arange(seq, torch::kFloat64), inv);
        auto e = torch::cat({f, f}, -1).to(torch::kFloat);
        cos = register_buffer("cos", e.cos());
        sin = register_buffer("sin", e.sin());
        mask = register_buffer("mask", torch::ones({seq, seq}, torch::kBool).triu(1));
    }
    torch::Tensor forward(torch::Tensor x)
    {
        int64_t B = x.size(0), T = x.size(1);
        auto a = ln1->forward(x);
        auto qs = q->forward(a).view({B, T, heads, hd}).transpose(1, 2);
        auto ks = k->forward(a).view({B, T, kv_heads, hd}).transpose(1, 2);
        auto vs = v->forward(a).view({B, T, kv_heads, hd}).transpose(1, 2);
        auto c = cos.slice(0, 0, T), s = sin.slice(0, 0, T);
        qs = qs * c + rotate_half(qs) * s;
        ks = ks * c + rotate_half(ks) * s;
        if (kv_heads != heads) {
            /* transformers' repeat_kv: each key/value head for its group. */
            int64_t g = heads / kv_heads;
            ks = ks.unsqueeze(2).expand({B, kv_heads, g, T, hd}).reshape({B, heads, T, hd});
            vs = vs.unsqueeze(2).expand({B, kv_heads, g, T, hd}).reshape({B, heads, T, hd});
        }
        auto y = attend(qs, ks, vs, mask, pdrop, is_training());
        x = x + o->forward(y.transpose(1, 2).reshape({B, T, heads * hd}));
        auto m = ln2->forward(x);
        return x + down->forward(torch::silu(gate->forward(m)) * up->forward(m));
    }
};
TORCH_MODULE(LlamaBlock);

/* The final norm, the head and the loss: tied, the head's weight is the
 * embedding's tensor itself (one storage, counted once).  The loss is
 * transformers' causal-LM loss as it costs memory: the logits upcast to
 * fp32, cross-entropy against token labels (drawn from the stage's seed, so
 * a recomputation draws the same), the per-sample mean the stage's output
 * (in the model's dtype, [batch]: the chain's rule of one tensor out). */
struct HeadImpl : nn::Module {
    nn::AnyModule norm;
    torch::Tensor weight;
    HeadImpl(const rematx_hf &h, const torch::Tensor &tied)
    {
        if (h.family == REMATX_HF_GPT2)
            norm = nn::AnyModule(register_module(
                "ln_f", nn::LayerNorm(nn::LayerNormOptions({h.hidden}).eps(h.norm_eps))));
        else
            norm = nn::AnyModule(register_module("norm", RmsNorm(h.hidden, h.norm_eps)));
        weight = register_parameter(
            "lm_head", tied.defined() ? tied : torch::randn({h.vocab, h.hidden}) * 0.02);
    }
    torch::Tensor forward(torch::Tensor x)
    {
        auto logits = torch::linear(norm.forward<torch::Tensor>(x), weight).to(torch::kFloat);
        int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
        auto labels = torch::randint(0, V, {B * T}, logits.options().dtype(torch::kLong));
        auto loss = torch::nll_loss(torch::log_softmax(logits.view({B * T, V}), -1), labels, {},
                                    at::Reduction::None);
        return loss.view({B, T}).mean(1).to(x.scalar_type());
    }
};
TORCH_MODULE(Head);

/* GPT-2's embedding: tokens and learned positions, then dropout. */
struct Gpt2EmbeddingImpl : nn::Module {
    nn::Embedding wte{nullptr}, wpe{nullptr};
    double pdrop;
    Gpt2EmbeddingImpl(const rematx_hf &h) : pdrop(h.embd_pdrop)
    {
        wte = register_module("wte", nn::Embedding(h.vocab, h.hidden));
        wpe = register_module("wpe", nn::Embedding(h.max_positions, h.hidden));
    }
    torch::Tensor forward(torch::Tensor ids)
    {
        auto pos = torch::arange(ids.size(1), ids.options().dtype(torch::kLong));
        auto x = wte->forward(ids) + wpe->forward(pos);
        return pdrop > 0 ? torch::dropout(x, pdrop, is_training()) : x;
    }
};
TORCH_MODULE(Gpt2Embedding);

/* GPT-2's block (transformers' GPT2Block): ln_1, fused qkv (c_attn), causal
 * attention, c_proj with dropout; ln_2, c_fc, gelu_new, c_proj, dropout. */
struct Gpt2BlockImpl : nn::Module {
    nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    nn::Linear attn{nullptr}, proj{nullptr}, fc{nullptr}, fc_proj{nullptr};
    torch::Tensor mask;
    int64_t heads;
    double attn_pdrop, resid_pdrop;
    std::string approx;
    Gpt2BlockImpl(const rematx_hf &h, int64_t seq)
        : heads(h.heads), attn_pdrop(h.attn_pdrop), resid_pdrop(h.resid_pdrop),
          approx(h.gelu_tanh ? "tanh" : "none")
    {
        int64_t d = h.hidden;
        ln1 = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({d}).eps(h.norm_eps)));
        attn = register_module("c_attn", nn::Linear(d, 3 * d));
        proj = register_module("c_proj", nn::Linear(d, d));
        ln2 = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({d}).eps(h.norm_eps)));
        fc = register_module("c_fc", nn::Linear(d, h.intermediate));
        fc_proj = register_module("mlp_c_proj", nn::Linear(h.intermediate, d));
        mask = register_buffer("mask", torch::ones({seq, seq}, torch::kBool).triu(1));
    }
    torch::Tensor drop(const torch::Tensor &x, double p)
    {
        return p > 0 ? torch::dropout(x, p, is_training()) : x;
    }
    torch::Tensor forward(torch::Tensor x)
    {
        int64_t B = x.size(0), T = x.size(1), D = x.size(2), hd = D / heads;
        auto qkv = attn->forward(ln1->forward(x)).split(D, 2);
        auto q = qkv[0].view({B, T, heads, hd}).transpose(1, 2);
        auto k = qkv[1].view({B, T, heads, hd}).transpose(1, 2);
        auto v = qkv[2].view({B, T, heads, hd}).transpose(1, 2);
        auto y = attend(q, k, v, mask, attn_pdrop, is_training());
        x = x + drop(proj->forward(y.transpose(1, 2).reshape({B, T, D})), resid_pdrop);
        auto m = torch::gelu(fc->forward(ln2->forward(x)), approx);
        return x + drop(fc_proj->forward(m), resid_pdrop);
    }
};
TORCH_MODULE(Gpt2Block);

/* The distinct parameters of a module not already in seen. */
int64_t count_new(const nn::Module &m, std::unordered_set<const void *> &seen)
{
    int64_t n = 0;
    for (const auto &p : m.parameters())
        if (seen.insert(p.unsafeGetTensorImpl()).second)
            n += p.numel();
    return n;
}

} // namespace

std::vector<HfStage> hf_stages(const rematx_hf &h, int64_t seq)
{
    torch::manual_seed(4321);
    std::vector<HfStage> out;
    std::unordered_set<const void *> seen;
    auto check = [&](const nn::Module &m, int64_t want, const std::string &what) {
        int64_t got = count_new(m, seen);
        if (got != want)
            throw Failure("hf_config: the built " + what + " has " + std::to_string(got) +
                          " parameters, the config's count is " + std::to_string(want));
    };
    bool gpt2 = h.family == REMATX_HF_GPT2;
    torch::Tensor tok;
    {
        HfStage st{"embedding",
                   gpt2 ? "gpt2_embedding" : "llama_embedding",
                   nn::Sequential(),
                   {seq, h.hidden}};
        if (gpt2) {
            Gpt2Embedding e(h);
            tok = e->wte->weight;
            st.seq->push_back(e);
        } else {
            LlamaEmbedding e(h.vocab, h.hidden);
            tok = e->tok->weight;
            st.seq->push_back(e);
        }
        check(*st.seq, rematx_hf_embedding_params(&h), "embedding");
        out.push_back(std::move(st));
    }
    for (int64_t i = 0; i < h.layers; i++) {
        HfStage st{"block" + std::to_string(i),
                   gpt2 ? "gpt2_block" : "llama_block",
                   nn::Sequential(),
                   {seq, h.hidden}};
        if (gpt2)
            st.seq->push_back(Gpt2Block(h, seq));
        else
            st.seq->push_back(LlamaBlock(h, seq));
        check(*st.seq, rematx_hf_block_params(&h), "block " + std::to_string(i));
        out.push_back(std::move(st));
    }
    HfStage st{"head", "lm_head_loss", nn::Sequential(), {}};
    st.seq->push_back(Head(h, h.tied ? tok : torch::Tensor()));
    check(*st.seq, rematx_hf_head_params(&h), "head");
    out.push_back(std::move(st));
    return out;
}

} // namespace rw
