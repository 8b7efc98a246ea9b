#!/bin/sh
# A model from its Hugging Face config.json (docs/models.md, "From a Hugging
# Face config"): POST /v1/profiles and /v1/fits take hf_config with seq_len,
# queue a job whose spec holds the normalised config (harmless fields
# dropped, so that two spellings share a reuse key), and refuse before
# queueing: an architecture remat does not build, or a field that changes
# the computation, is 422 unsupported-model naming it; a bad value, a
# missing or too long seq_len, or fields of another model spec are 400.
# A worker's profile must name the config's model (hf:<model_type>) with
# its stage count (blocks + 2).
. "$(dirname "$0")/lib.sh"
start_rematd

TINY='{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"vocab_size":1000,"torch_dtype":"bfloat16","transformers_version":"4.44.0","bos_token_id":1'
GPT2='{"model_type":"gpt2","n_embd":64,"n_layer":3,"n_head":4,"vocab_size":1000,"n_positions":128'

post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":32,\"device\":\"cpu\",\"batch_size\":2}"
expect 202 /v1/profiles
J1=$(field id)
grep -q '"hf_config":{' "$BODY" && grep -q '"num_key_value_heads":2' "$BODY" &&
    grep -q '"input_shape":\[32\]' "$BODY" && ok ||
    fail "the job's spec lacks the normalised config: $(head -c 400 "$BODY")"
grep -q 'transformers_version\|bos_token_id' "$BODY" &&
    fail "harmless fields kept in the spec: $(head -c 400 "$BODY")" || ok

# GPT-2's family, and /v1/fits with the same spec (its profile jobs queued).
post /v1/profiles "{\"hf_config\":$GPT2},\"seq_len\":128,\"device\":\"cpu\"}"
expect 202 /v1/profiles
post /v1/fits "{\"hf_config\":$GPT2},\"seq_len\":64,\"device\":\"cpu\",\"memory\":[\"t4\"],\"batches\":[1,2]}"
expect 202 /v1/fits

# The worker's profile must be of the config's model with its stages.
W='{"worker_id":"fake-1","kinds":["profile"],"devices":["cpu"]}'
post /v1/worker/lease "$W" && expect 200 /v1/worker/lease
JOB=$(field job_id)
LEASE=$(field lease_id)
[ "$JOB" = "$J1" ] && ok || fail "leased $JOB, not the first job $J1"
post "/v1/worker/jobs/$JOB/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 3 hf:llama 2 fp32 cpu)}"
problem "a profile with a stage too few" 400 validation /result/stages
post "/v1/worker/jobs/$JOB/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 4 hf:gpt2 2 fp32 cpu)}"
problem "a profile of another model" 400 validation /result/model
post "/v1/worker/jobs/$JOB/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 4 hf:llama 2 fp32 cpu)}"
expect 200 '/v1/worker/jobs/{id}/complete'
# Reused: the same config spelled otherwise (members reordered, harmless
# fields gone, defaults given).
post /v1/profiles '{"batch_size":2,"device":"cpu","seq_len":32,"hf_config":{"model_type":"llama","num_hidden_layers":2,"vocab_size":1000,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"tie_word_embeddings":false,"rope_scaling":null}}'
expect 200 /v1/profiles && [ "$(field cached)" = true ] && ok ||
    fail "an equal config was not reused: $(head -c 300 "$BODY")"

# 422: what remat does not build, named.
refuse() {
    post /v1/profiles "{\"hf_config\":$1,\"seq_len\":32,\"device\":\"cpu\"}"
    problem "$1" "$2" "$3" "$4"
}
refuse '{"architectures":["MixtralForCausalLM"],"hidden_size":64}' 422 unsupported-model /hf_config/architectures/0
refuse '{"model_type":"t5"}' 422 unsupported-model /hf_config/model_type
refuse "$TINY,\"num_local_experts\":8}" 422 unsupported-model /hf_config/num_local_experts
refuse "$TINY,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}" 422 unsupported-model /hf_config/rope_scaling/type
refuse "$TINY,\"mlp_bias\":true}" 422 unsupported-model /hf_config/mlp_bias
refuse "$TINY,\"pretraining_tp\":4}" 422 unsupported-model /hf_config/pretraining_tp
refuse "$TINY,\"hidden_act\":\"relu\"}" 422 unsupported-model /hf_config/hidden_act
refuse "$GPT2,\"activation_function\":\"relu\"}" 422 unsupported-model /hf_config/activation_function
# Mistral's window bites only past its width.
MISTRAL='{"model_type":"mistral","hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"num_hidden_layers":2,"vocab_size":1000,"sliding_window":16}'
refuse "$MISTRAL" 422 unsupported-model /hf_config/sliding_window
post /v1/profiles "{\"hf_config\":$MISTRAL,\"seq_len\":16,\"device\":\"cpu\"}" && expect 202 /v1/profiles

# 400: a bad value, seq_len, another spec's fields.
refuse "$TINY,\"head_dim\":15}" 400 validation /hf_config/head_dim
refuse '{"model_type":"llama","hidden_size":64}' 400 validation /hf_config/intermediate_size
refuse '[1]' 400 validation /hf_config
post /v1/profiles "{\"hf_config\":$TINY}}" && problem "no seq_len" 400 validation /seq_len
post /v1/profiles "{\"hf_config\":$GPT2},\"seq_len\":129}" && problem "seq_len past n_positions" 400 validation /seq_len
post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":8,\"input_shape\":[8]}" && problem "input_shape" 400 validation /input_shape
post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":8,\"model\":\"gpt\"}" && problem "two specs" 400 validation
post /v1/profiles '{"model":"gpt","seq_len":8}' && problem "seq_len without hf_config" 400 validation /seq_len
post /v1/fits '{"profile_ids":["0123456789abcdef0123456789abcdef"],"seq_len":8,"memory":["t4"]}' &&
    problem "seq_len without a model spec" 400 validation /seq_len
post /v1/fits "{\"hf_config\":$TINY,\"mlp_bias\":true},\"seq_len\":8,\"memory\":[\"t4\"]}" &&
    problem "fits: mlp_bias" 422 unsupported-model /hf_config/mlp_bias

# measure_seq_lens: two lengths, on CPU, for hf_config only; kept in the
# spec in ascending order (a scaled profile is not a measured one: its
# reuse key differs).
post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":1024,\"measure_seq_lens\":[128,64],\"device\":\"cpu\"}"
expect 202 /v1/profiles
J2=$(field id)
grep -q '"measure_seq_lens":\[64,128\]' "$BODY" && grep -q '"input_shape":\[1024\]' "$BODY" && ok ||
    fail "the spec lacks the lengths: $(head -c 400 "$BODY")"
post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":1024,\"device\":\"cpu\"}"
expect 202 /v1/profiles && [ "$(field id)" != "$J2" ] && ! grep -q measure_seq_lens "$BODY" && ok ||
    fail "a measured profile's spec names lengths: $(head -c 300 "$BODY")"
post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":1024,\"measure_seq_lens\":[64,128]}" &&
    problem "measure_seq_lens on cuda" 400 validation /device
for bad in '[64]' '[64,64]' '[64,2048]' '[0,64]' '[64,128,256]' '"64"'; do
    post /v1/profiles "{\"hf_config\":$TINY},\"seq_len\":1024,\"measure_seq_lens\":$bad,\"device\":\"cpu\"}" &&
        problem "measure_seq_lens $bad" 400 validation /measure_seq_lens
done
post /v1/profiles '{"model":"gpt","measure_seq_lens":[8,16],"device":"cpu"}' &&
    problem "measure_seq_lens without hf_config" 400 validation /measure_seq_lens
post /v1/fits '{"profile_ids":["0123456789abcdef0123456789abcdef"],"measure_seq_lens":[8,16],"memory":["t4"]}' &&
    problem "fits: measure_seq_lens without hf_config" 400 validation /measure_seq_lens

schema_check "$T/manifest"
finish
