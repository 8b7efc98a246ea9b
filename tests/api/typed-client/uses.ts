// Fifteen ordinary uses of rematd from TypeScript, through the types
// openapi-typescript generates from openapi.yaml (remat.d.ts) and the
// openapi-fetch client: tests/api/typed-client.sh compiles them with
// tsc --strict.  Each must compile as a client would write it.  The lines
// marked as expected errors at the end are requests the server refuses,
// which the types must refuse too (tsc fails on one they take).
import createClient from "openapi-fetch";
import type { components, paths } from "./remat";

type Schemas = components["schemas"];

// An error answer is a problem, or one of libmicrohttpd's own pages (text)
// when the request's framing was refused before rematd saw it.
function problem(e: Schemas["Problem"] | string | undefined): Schemas["Problem"] | undefined {
    return typeof e === "object" ? e : undefined;
}
const remat = createClient<paths>({
    baseUrl: "http://127.0.0.1:8080",
    headers: { Authorization: "Bearer token" },
});

export async function uses(): Promise<number> {
    let n = 0;

    // 1. A plan from an inline profile, made once whatever the retries.
    const plan = await remat.POST("/v1/plans", {
        params: { header: { "Idempotency-Key": "plan-resnet50-b32-1" } },
        body: {
            algorithm: "min-peak",
            profile: {
                input_bytes: 602112,
                stages: [{ name: "conv1", out_bytes: 3211264, saved_bytes: 6422528, fwd_ms: 0.4 }],
            },
        },
    });
    if (!plan.data) return -(problem(plan.error)?.status ?? 1);
    const stored: Schemas["Plan"] = plan.data;
    n += stored.schedule.filter((op) => op.op === "F_ck").length;
    n += stored.exports?.checkpoint_sequential.available ? 1 : 0;

    // 2. min-time under a budget, from a done profile job.
    const mt = await remat.POST("/v1/plans", {
        body: { profile_id: "0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6", algorithm: "min-time",
                budget_bytes: 1 << 30, mem_slots: 500 },
    });
    const why = problem(mt.error);
    if (why?.type === "/problems/infeasible") n += why.min_budget_bytes ?? 0;

    // 3. The plan again.
    const again = await remat.GET("/v1/plans/{id}", { params: { path: { id: stored.id } } });
    n += again.data?.peak_bytes ?? 0;
    // 4. Its timeline, as SVG text.
    const svg = await remat.GET("/v1/plans/{id}/timeline.svg", {
        params: { path: { id: stored.id } }, parseAs: "text",
    });
    n += svg.data?.length ?? 0;

    // 5. A profile job of a zoo model with the optimizer the worker measures.
    const job = await remat.POST("/v1/profiles", {
        body: { model: "resnet50", batch_size: 32, dtype: "fp16", device: "cuda:0",
                optimizer: { name: "adamw", weight_decay: true } },
    });
    // 6. gpt with its options.
    await remat.POST("/v1/profiles", {
        body: { model: "gpt", model_options: { d_model: 768, heads: 12, layers: 12, seq_len: 1024 } },
    });
    // 7. An uploaded model with its input and stages.
    await remat.POST("/v1/profiles", {
        body: { model_id: "0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6",
                input: { shape: [128], dtype: "int64", high: 50257 }, stages: ["embed", "blocks.0"] },
    });

    // 8. The job polled: a profile job's profile when done, or the reuse.
    if (job.data) {
        const got = await remat.GET("/v1/profiles/{id}", { params: { path: { id: job.data.id } } });
        const j = got.data;
        if (j?.kind === "profile" && j.status === "done") n += j.profile?.stages.length ?? 0;
        if (j?.kind === "profile" && j.cached) n += 1;
    }

    // 9. fits from done profiles and GPU names.
    const fits = await remat.POST("/v1/fits", {
        params: { header: { "Idempotency-Key": "fits-1" } },
        body: { profile_ids: ["0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6", "0192d3c4e5f6a7b8c9d0e1f2a3b4c5d7"],
                optimizer: { name: "adam", foreach: true, master_weights: true },
                memory: ["a100-40gb", 17179869184], margin_fraction: 0.05 },
    });
    if (fits.response.status === 200 && fits.data && "answers" in fits.data) {
        for (const a of fits.data.answers) n += a.largest.batch + (a.largest.plan?.schedule.length ?? 0);
    }

    // 10. fits from a model spec (a layer list): 200 at once, or a fits job.
    const spec = await remat.POST("/v1/fits", {
        body: { layers: [{ type: "linear", out_features: 16 }, { type: "relu" }], input_shape: [8],
                device: "cpu", batches: [8, 32], memory: [1 << 30], confirm: true },
    });
    // 11. The fits job read until done: its result is a fits answer.
    if (spec.data && "kind" in spec.data) {
        const fj = await remat.GET("/v1/fits/{id}", { params: { path: { id: spec.data.id } } });
        if (fj.data?.kind === "fits" && fj.data.result) n += fj.data.result.measured_batches.length;
    }

    // 12. A validation of the plan, and its measurements.
    const v = await remat.POST("/v1/validations", {
        body: { profile_id: "0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6", plan_id: stored.id, repeats: 3,
                timeline: true },
    });
    if (v.data) {
        const vr = await remat.GET("/v1/validations/{id}", { params: { path: { id: v.data.id } } });
        const r = vr.data?.kind === "validation" ? vr.data.result : undefined;
        n += (r?.measured_peak_bytes ?? 0) + (r?.timeline?.[0]?.after_bytes ?? 0) + (r?.n_ops ?? 0);
    }

    // 13. The zoo and the uploaded models.
    const models = await remat.GET("/v1/models");
    n += models.data?.models.find((m) => m.name === "gpt")?.default_input_shape.length ?? 0;
    await remat.DELETE("/v1/models/{id}", { params: { path: { id: "0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6" } } });

    // 14. A worker's lease, heartbeat and release.
    const lease = await remat.POST("/v1/worker/lease", {
        body: { worker_id: "ts-1", kinds: ["profile"], devices: ["cpu"] },
    });
    if (lease.data) {
        const id = lease.data.job_id;
        await remat.POST("/v1/worker/jobs/{id}/heartbeat", {
            params: { path: { id } },
            body: { lease_id: lease.data.lease_id, progress: { stage: 1, stages: 3, activity: "measuring" } },
        });
        await remat.POST("/v1/worker/jobs/{id}/release", {
            params: { path: { id } }, body: { lease_id: lease.data.lease_id },
        });
    }

    // 15. An error as the problem it is, with its request id.
    const bad = await remat.POST("/v1/plans", { body: { profile_id: "nope" } });
    const refused = problem(bad.error);
    if (refused) n += refused.pointer === "/profile_id" ? refused.status : 0;
    n += (await remat.GET("/healthz")).data?.status === "ok" ? 1 : 0;

    // What the server refuses, the types refuse.
    // @ts-expect-error a model that is not in the zoo
    await remat.POST("/v1/fits", { body: { model: "resnet51", memory: [1] } });
    // @ts-expect-error a timeline op the schedule has no name for
    const op: Schemas["Schedule"][number]["op"] = "F_some";
    // @ts-expect-error a profile job's dtype
    await remat.POST("/v1/profiles", { body: { model: "alexnet", dtype: "fp64" } });
    return n + op.length;
}
