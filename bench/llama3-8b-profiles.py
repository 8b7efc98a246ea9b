#!/usr/bin/env python3
"""The cached profiles bench/fits_bench answers Llama-3-8B from
(bench/data/llama3-8b-s4096-b{1,2}.json): its config with three decoder
blocks (the worker measures the first two and copies the second, so the
bench takes the second's numbers for blocks 2..31 as the worker would),
fp32 (libtorch on CPU runs bf16 matmuls far slower), batches 1 and 2, at
seq 4096 scaled from 16 and 32 on CPU
(measure_seq_lens: docs/scheduling.md, "Sizes too large to run here").

    top_builddir=build python3 bench/llama3-8b-profiles.py bench/data

Starts rematd and a CPU remat-worker on loopback (tests/worker/lib.py);
about 10 GB of memory.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "worker"))
import lib  # noqa: E402

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
             "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
             "max_position_embeddings": 8192, "model_type": "llama",
             "num_attention_heads": 32, "num_hidden_layers": 3, "num_key_value_heads": 8,
             "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16", "vocab_size": 128256}

out = sys.argv[1] if len(sys.argv) > 1 else "bench/data"
lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-llama3-8b-")
try:
    run.start_rematd()
    run.start_worker("worker")
    for b in (1, 2):
        st, job = run.http("POST", "/v1/profiles", {
            "hf_config": LLAMA3_8B, "seq_len": 4096, "measure_seq_lens": [16, 32],
            "batch_size": b, "dtype": "fp32", "device": "cpu", "warmup": 1, "repeats": 1})
        run.check(st == 202, "batch %d: queued (%s %s)" % (b, st, job))
        job = run.wait_job("/v1/profiles/" + job["id"], timeout=3600)
        if run.check(job["status"] == "done", "batch %d: %s" % (b, job.get("error"))):
            path = os.path.join(out, "llama3-8b-s4096-b%d.json" % b)
            with open(path, "w") as f:
                json.dump(job["profile"], f, indent=1, sort_keys=True)
                f.write("\n")
            print("wrote", path)
finally:
    sys.exit(run.finish())
