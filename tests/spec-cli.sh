#!/bin/sh
# `remat spec --hf-config FILE`: Hugging Face's parameter counts (GPT-2
# small, Llama-3-8B), the body of POST /v1/profiles with the normalised
# config (harmless fields dropped), and refusals that name the field with
# exit 2.
set -u
remat=${top_builddir:-.}/cli/remat
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }

cat >"$tmp/gpt2.json" <<'J'
{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
 "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
 "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
 "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257}
J
cat >"$tmp/llama3.json" <<'J'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
 "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
 "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}
J
[ "$("$remat" spec --hf-config "$tmp/gpt2.json" --params)" = 124439808 ] ||
    die "GPT-2 small: $("$remat" spec --hf-config "$tmp/gpt2.json" --params 2>&1)"
[ "$("$remat" spec --hf-config "$tmp/llama3.json" --params)" = 8030261248 ] ||
    die "Llama-3-8B: $("$remat" spec --hf-config "$tmp/llama3.json" --params 2>&1)"

"$remat" spec --hf-config "$tmp/llama3.json" --seq-len 2048 --batch-size 4 --dtype bf16 \
    >"$tmp/body" 2>"$tmp/err" || die "spec exited $?: $(cat "$tmp/err")"
grep -q '"seq_len":2048' "$tmp/body" && grep -q '"batch_size":4' "$tmp/body" &&
    grep -q '"num_key_value_heads":8' "$tmp/body" && grep -q '"dtype":"bf16"' "$tmp/body" ||
    die "body: $(cat "$tmp/body")"
grep -q torch_dtype "$tmp/body" && die "a harmless field kept: $(cat "$tmp/body")"

# refused FILE-TEXT WANT-IN-STDERR [ARGS...]: exit 2 with that on stderr.
refused() {
    printf '%s' "$1" >"$tmp/bad.json"
    want=$2
    shift 2
    "$remat" spec --hf-config "$tmp/bad.json" "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc = 2 ] && grep -q -- "$want" "$tmp/err" || die "want exit 2 with '$want', got $rc: $(cat "$tmp/err")"
}
refused '{"architectures": ["MixtralForCausalLM"]}' /hf_config/architectures/0 --params
refused '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 10, "rope_scaling": {"type": "yarn"}}' /hf_config/rope_scaling/type --params
refused '{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 10, "n_positions": 8}' "past the config's positions" --seq-len 9
refused '{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 10}' "needs a value" --seq-len
refused '{"model_type": "gpt2"' "" --params
"$remat" spec --seq-len 8 >/dev/null 2>&1
[ $? = 2 ] || die "no --hf-config: not exit 2"

[ $fail = 0 ] && echo "ok: remat spec"
exit $fail
