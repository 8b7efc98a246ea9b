#!/bin/sh
# A full-size transformer from its Hugging Face config on a CUDA GPU
# (docs/models.md, "From a Hugging Face config"): Llama-3-8B's config (or
# CONFIG=path/config.json), bf16, SEQ_LEN 2048, BATCH 1.  The profile's
# parameter bytes must be Hugging Face's count (8,030,261,248) times 2, the
# blocks past the second replicated (measured_as), and the min-peak plan,
# run for real on the whole stack, within PEAK_TOLERANCE percent (3) of its
# predicted peak.  LAYERS cuts the depth (the store-all run beside the plan
# holds every block's activations: 32 blocks at 2048 tokens need an H200).
# Exit 1 on a miss, named.
#
# It needs a CUDA device and a CUDA PyTorch: without them it stops at once
# with exit 2 and says so. It cannot run on the CPU-only CI machines.
#
#   tests/worker/gpu-hf.sh RESULTS_DIR [HEADER_DIR]
set -e
. "$(dirname "$0")/gpu-common.sh"
gpu_setup gpu-hf.sh "this check" "$@"
cfg=${CONFIG:-$res/llama3-8b.json}
if [ -z "${CONFIG:-}" ]; then
    cat >"$cfg" <<'J'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
 "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
 "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}
J
fi
if [ -n "${LAYERS:-}" ]; then
    python3 - "$cfg" "$LAYERS" "$res/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["n_layer" if c.get("model_type") == "gpt2" else "num_hidden_layers"] = int(sys.argv[2])
json.dump(c, open(sys.argv[3], "w"))
PY
    cfg=$res/config.json
fi
"$REMAT" spec --hf-config "$cfg" --seq-len "${SEQ_LEN:-2048}" --batch-size "${BATCH:-1}" \
    --dtype "${DTYPE:-bf16}" --device "$dev" >"$res/spec.json"
params=$("$REMAT" spec --hf-config "$cfg" --params)
t0=$(date +%s)
"$WORKER" --device "$dev" --profile-local "$res/spec.json" --trace >"$res/profile.json" \
    2>"$res/profile.log"
echo "profiled in $(($(date +%s) - t0)) s"
"$REMAT" plan --algorithm min-peak --format json "$res/profile.json" >"$res/plan.json"
"$WORKER" --device "$dev" --validate-local "$res/spec.json" "$res/plan.json" \
    --profile "$res/profile.json" --repeats 1 >"$res/result.json"
python3 - "$res" "$params" "${DTYPE:-bf16}" "${PEAK_TOLERANCE:-3}" <<'PY'
import json, sys
res, params, dtype, tol = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
p = json.load(open(res + "/profile.json"))
r = json.load(open(res + "/result.json"))
bad = []
elem = 4 if dtype == "fp32" else 2
pb = sum(s["param_bytes"] for s in p["stages"])
if pb != elem * params:
    bad.append("param_bytes %d, not %d x %d" % (pb, elem, params))
blocks = [s for s in p["stages"] if s["name"].startswith("block")]
marks = [s.get("measured_as") for s in blocks]
if len(blocks) >= 3 and marks != [None, None] + ["block1"] * (len(blocks) - 2):
    bad.append("measured_as %s" % marks)
pred, meas = r.get("predicted_peak_bytes"), r.get("measured_peak_bytes")
print("min-peak: predicted %s, measured %s bytes" % (pred, meas))
if not (isinstance(pred, int) and isinstance(meas, int) and abs(meas - pred) <= tol / 100 * meas):
    bad.append("peak %s predicted, %s measured: past %g%%" % (pred, meas, tol))
for b in bad:
    print("MISS " + b)
sys.exit(1 if bad else 0)
PY
