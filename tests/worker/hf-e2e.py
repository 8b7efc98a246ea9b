#!/usr/bin/env python3
"""Transformers from their Hugging Face config end to end: the real rematd
and a real CPU remat-worker on loopback (docs/models.md, "From a Hugging
Face config").

1. Tiny configs of each family (hidden 64, 2-4 blocks, vocabulary 1000): a
   Llama with grouped-query attention, a tied Llama with attention_bias, a
   Qwen2 (q/k/v bias), a Mistral with a window wider than seq_len, and a
   GPT-2 with its dropout, are profiled: named hf:<model_type>, stages
   embedding, block0.., head, and their param_bytes sum to the parameter
   count Hugging Face's model has (computed here by the families' own
   formulas, independently of src/rematx/hfconfig.c) times the element size.
2. On each, a min-peak and a sqrt plan validate: measured vs predicted peak
   within 1% both ways and gradients equal to store-all's (a recomputed
   block, its dropout and the loss's labels drawn again the same).
   Blocks past the second are not measured: the second checks the first,
   the rest take its numbers, marked measured_as (docs/profile.md); plans
   on such a profile validate against the full run, 6 and 48 blocks too.
3. bf16 and an optimizer (adamw) on one: the profile's optimizer state is
   two fp32-sized moments per parameter as libtorch keeps them.
4. POST /v1/fits on a config: its profiles measured, a largest batch named.
5. A config rematd refuses never reaches the worker (422, nothing queued).
6. Sizes too long to run (docs/scheduling.md, "Sizes too large to run
   here"): profiles measured at two short lengths and scaled to a longer
   one (64 from 16 and 32, where the backward's peak changes branch; 256
   from 32 and 64, where the attention scores' quadratic branch takes over
   the forward's), against the same measured at that length: every byte
   field of every stage, and the peak of each plan (store-all, sqrt,
   min-peak), within 3%; POST /v1/fits from scaled profiles against
   measured ones within 3%, saying what was measured and what scaled.

Skips (77) when rematd or the worker is missing.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-hf-e2e-")
check, http, wait_job = run.check, run.http, run.wait_job


def llama(mt, **kw):
    c = {"architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                            "qwen2": "Qwen2ForCausalLM"}[mt]], "model_type": mt,
         "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "num_hidden_layers": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}
    c.update(kw)
    return c


def params(c):
    """Hugging Face's count for the config, written from transformers'
    modules (LlamaAttention, LlamaMLP, Qwen2Attention, GPT2Block)."""
    if c.get("model_type") == "gpt2":
        d, n, v, p = c["n_embd"], c["n_layer"], c["vocab_size"], c.get("n_positions", 1024)
        inner = c.get("n_inner") or 4 * d
        block = 2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + d * inner + inner + inner * d + d
        return v * d + p * d + n * block + 2 * d
    d, i, n, v = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    h = c["num_attention_heads"]
    kv = c.get("num_key_value_heads", h)
    hd = c.get("head_dim", d // h)
    mt = c["model_type"]
    qkv_bias = mt == "qwen2" or c.get("attention_bias", False)
    o_bias = mt == "llama" and c.get("attention_bias", False)
    attn = d * h * hd + 2 * d * kv * hd + h * hd * d
    attn += (h * hd + 2 * kv * hd) * qkv_bias + d * o_bias
    block = attn + 3 * d * i + 2 * d
    head = 0 if c.get("tie_word_embeddings", False) else v * d
    return v * d + n * block + d + head


CONFIGS = [
    ("llama-gqa", llama("llama", num_key_value_heads=2, num_hidden_layers=3)),
    ("llama-tied-bias", llama("llama", tie_word_embeddings=True, attention_bias=True,
                              num_hidden_layers=4)),
    ("qwen2", llama("qwen2", num_key_value_heads=1, tie_word_embeddings=True,
                    use_sliding_window=False, sliding_window=4096, max_window_layers=2)),
    ("mistral", llama("mistral", num_key_value_heads=2, sliding_window=64, head_dim=32)),
    ("gpt2", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64,
              "n_layer": 3, "n_head": 4, "vocab_size": 1000, "n_positions": 64,
              "activation_function": "gelu_new", "n_ctx": 64, "summary_type": "cls_index"}),
]
SEQ, BATCH = 16, 2


def profile(label, cfg, dtype="fp32", optimizer=None):
    body = {"hf_config": cfg, "seq_len": SEQ, "batch_size": BATCH, "device": "cpu",
            "dtype": dtype, "warmup": 1, "repeats": 2}
    if optimizer:
        body["optimizer"] = optimizer
    st, job = http("POST", "/v1/profiles", body)
    if not check(st == 202, "%s: queued (%s %s)" % (label, st, job)):
        return None
    job = wait_job("/v1/profiles/" + job["id"], timeout=300)
    if not check(job["status"] == "done", "%s: profiled (%s)" % (label, job.get("error"))):
        return None
    return job


try:
    run.start_rematd()
    run.start_worker("worker")
    for label, cfg in CONFIGS:
        job = profile(label, cfg)
        if job is None:
            continue
        p = job["profile"]
        n = cfg.get("n_layer", cfg.get("num_hidden_layers"))
        names = [s["name"] for s in p["stages"]]
        check(p.get("model") == "hf:" + cfg["model_type"] and
              names == ["embedding"] + ["block%d" % k for k in range(n)] + ["head"],
              "%s: model %s, stages %s" % (label, p.get("model"), names))
        got = sum(s["param_bytes"] for s in p["stages"])
        check(got == 4 * params(cfg), "%s: param_bytes %d = 4 x %d parameters"
              % (label, got, params(cfg)))
        blocks = [s for s in p["stages"] if s["name"].startswith("block")]
        check(len({s["param_bytes"] for s in blocks}) == 1 and
              len({s["out_bytes"] for s in blocks}) == 1,
              "%s: the blocks are alike (param_bytes, out_bytes)" % label)
        check(blocks[0]["out_bytes"] == BATCH * SEQ * 64 * 4 and
              p["stages"][-1]["out_bytes"] == BATCH * 4,
              "%s: a block's output is [batch, seq, hidden], the head's the per-sample loss"
              % label)
        # Blocks past the second are the second's numbers, marked so.
        marks = [s.get("measured_as") for s in blocks]
        check(marks == [None, None] + ["block1"] * (n - 2) if n >= 3 else marks == [None] * n,
              "%s: measured_as %s" % (label, marks))
        run.validate_plans(job, label, timeout=300)

    # bf16 with AdamW: parameters in bf16, libtorch's moments in the
    # parameters' dtype (two per parameter).
    label, cfg = CONFIGS[0]
    job = profile(label + " bf16 adamw", cfg, dtype="bf16", optimizer="adamw")
    if job is not None:
        p = job["profile"]
        pb = sum(s["param_bytes"] for s in p["stages"])
        opt = p.get("optimizer") or {}
        check(pb == 2 * params(cfg) and opt.get("state_bytes", 0) >= 2 * pb,
              "%s: param_bytes %d (2 x %d), optimizer state %s bytes"
              % (label, pb, params(cfg), opt.get("state_bytes")))

    # A deep stack profiles in about the time of a shallow one: two blocks
    # measured either way (printed, not held: this machine's load decides).
    for layers in (6, 48):
        t0 = time.time()
        job = profile("llama %d blocks" % layers, llama("llama", num_hidden_layers=layers))
        if job is not None:
            print("info llama, %d blocks: profiled in %.2f s" % (layers, time.time() - t0))
            check(sum(1 for s in job["profile"]["stages"] if s.get("measured_as")) == layers - 2,
                  "llama %d blocks: %d replicated" % (layers, layers - 2))
            run.validate_plans(job, "llama %d blocks" % layers, timeout=300)

    # POST /v1/fits takes the same spec: its profiles are measured by the
    # worker and the answer names a largest batch under the memory.
    st, fj = http("POST", "/v1/fits", {"hf_config": CONFIGS[0][1], "seq_len": SEQ,
                                       "device": "cpu", "batches": [1, 2],
                                       "memory": [16000000]})
    if check(st == 202, "fits on a config: 202 (%s)" % st):
        fj = wait_job("/v1/fits/" + fj["id"], timeout=300)
        r = fj.get("result") or {}
        a = (r.get("answers") or [{}])[0]
        check(fj["status"] == "done" and sorted(r.get("measured_batches", [])) == [1, 2]
              and a.get("largest", {}).get("batch", 0) >= 1,
              "fits on a config: largest batch %s under 16 MB (%s)"
              % (a.get("largest", {}).get("batch"), fj.get("error")))

    # Scaled in seq.  Byte fields within 3% (the traces replay exactly);
    # times are printed, not held: on this shared CPU two runs of one size
    # differ by more than 3%.
    cfg = CONFIGS[0][1]
    BYTES = ("out_bytes", "saved_bytes", "fwd_tmp_bytes", "fwd_grad_tmp_bytes", "bwd_tmp_bytes",
             "bwd_freed_bytes", "param_bytes")

    def seq_profile(b, seq, lens=None):
        body = {"hf_config": cfg, "seq_len": seq, "batch_size": b, "device": "cpu",
                "warmup": 1, "repeats": 2}
        if lens:
            body["measure_seq_lens"] = lens
        st, job = http("POST", "/v1/profiles", body)
        if not check(st == 202, "seq %d from %s: queued (%s %s)" % (seq, lens, st, job)):
            return None
        job = wait_job("/v1/profiles/" + job["id"], timeout=300)
        check(job["status"] == "done", "seq %d from %s: profiled (%s)" % (seq, lens, job.get("error")))
        return job if job["status"] == "done" else None

    def peak(job, alg):
        st, plan = http("POST", "/v1/plans", {"profile_id": job["id"], "algorithm": alg})
        check(st in (200, 201), "plan %s: %s" % (alg, st))
        return plan.get("peak_bytes", 0)

    def near(x, y):
        return abs(x - y) <= 0.03 * max(abs(y), 1)

    for seq, lens in ((64, [16, 32]), (256, [32, 64])):
        for b in (1, 2):
            sj, mj = seq_profile(b, seq, lens), seq_profile(b, seq)
            if sj is None or mj is None:
                continue
            sp, mp = sj["profile"], mj["profile"]
            label = "batch %d, seq %d from %s" % (b, seq, lens)
            check(sp.get("scaled_from") == {"seq_len": seq, "measured_seq_lens": lens} and
                  "scaled_from" not in mp, "%s: scaled_from %s" % (label, sp.get("scaled_from")))
            off = ["%s.%s %d/%d" % (x["name"], f, x[f], y[f])
                   for x, y in zip(sp["stages"], mp["stages"]) for f in BYTES
                   if not near(x[f], y[f])]
            if not near(sp["input_bytes"], mp["input_bytes"]):
                off.append("input_bytes %d/%d" % (sp["input_bytes"], mp["input_bytes"]))
            check(len(sp["stages"]) == len(mp["stages"]) and not off,
                  "%s: every byte field of every stage within 3%% of the measured (%s)"
                  % (label, off or "all"))
            for alg in ("store-all", "sqrt", "min-peak"):
                ps, pm = peak(sj, alg), peak(mj, alg)
                check(pm > 0 and near(ps, pm), "%s, %s: peak %d scaled, %d measured"
                      % (label, alg, ps, pm))
            times = ["%s %.2f/%.2f %.2f/%.2f" % (x["name"], x["fwd_ms"], y["fwd_ms"], x["bwd_ms"],
                                                  y["bwd_ms"])
                     for x, y in zip(sp["stages"], mp["stages"])]
            print("info %s: fwd_ms, bwd_ms scaled/measured: %s" % (label, ", ".join(times)))

    # The fits answers from profiles scaled to 256 and from profiles measured there.
    def fits(**kw):
        body = {"hf_config": cfg, "seq_len": 256, "device": "cpu", "batches": [1, 2],
                "warmup": 1, "repeats": 2, "memory": [6000000, 12000000, 32000000],
                "throughput": False}
        body.update(kw)
        st, fj = http("POST", "/v1/fits", body)
        if st == 202:
            fj = wait_job("/v1/fits/" + fj["id"], timeout=300)
            check(fj["status"] == "done", "fits %s: done (%s)" % (kw, fj.get("error")))
            return fj.get("result") or {}
        check(st == 200, "fits %s: 200 or 202 (%s %s)" % (kw, st, fj.get("detail")))
        return fj

    a, m = fits(measure_seq_lens=[32, 64]), fits()
    check(a.get("scaled_from") == {"seq_len": 256, "measured_seq_lens": [32, 64]} and
          sorted((x["batch_size"], x["seq_len"]) for x in a.get("measured", [])) ==
          [(1, 32), (1, 64), (2, 32), (2, 64)] and "scaled_from" not in m and "measured" not in m,
          "fits: measured %s, scaled_from %s" % (a.get("measured"), a.get("scaled_from")))
    pairs = list(zip(a.get("answers", []), m.get("answers", [])))
    check(len(pairs) == 3, "fits: three answers each")
    for x, y in pairs:
        for k in ("largest", "store_all"):
            check(x[k]["batch"] == y[k]["batch"] and near(x[k]["peak_bytes"], y[k]["peak_bytes"]),
                  "fits, memory %d, %s: batch %d peak %d scaled, batch %d peak %d measured"
                  % (x["memory_bytes"], k, x[k]["batch"], x[k]["peak_bytes"], y[k]["batch"],
                     y[k]["peak_bytes"]))

    for body, ptr in (({"model": "resnet18", "measure_seq_lens": [16, 32], "device": "cpu"},
                       "/measure_seq_lens"),
                      ({"hf_config": cfg, "seq_len": 64, "measure_seq_lens": [16, 32, 48],
                        "device": "cpu"}, "/measure_seq_lens"),
                      ({"hf_config": cfg, "seq_len": 64, "measure_seq_lens": [16, 128],
                        "device": "cpu"}, "/measure_seq_lens"),
                      ({"hf_config": cfg, "seq_len": 64, "measure_seq_lens": [16, 32]},
                       "/device")):
        st, prob = http("POST", "/v1/profiles", body)
        check(st == 400 and prob.get("pointer") == ptr,
              "measure_seq_lens refused at %s (%s %s)" % (ptr, st, prob.get("detail")))
    st, prob = http("POST", "/v1/fits", {"model": "resnet18", "measure_seq_lens": [16, 32],
                                         "device": "cpu", "memory": [1000000]})
    check(st == 400 and prob.get("pointer") == "/measure_seq_lens",
          "fits: measure_seq_lens without hf_config refused (%s %s)" % (st, prob.get("detail")))

    st, prob = http("POST", "/v1/profiles", {"hf_config": llama("llama", num_experts=8),
                                             "seq_len": SEQ, "device": "cpu"})
    check(st == 422 and prob.get("pointer") == "/hf_config/num_experts",
          "an MoE field: 422 naming it (%s %s)" % (st, prob))
finally:
    sys.exit(run.finish())
