-- wrk script for make bench-http: POST /v1/plans with the 50-stage profile in
-- the file named by REMAT_BENCH_BODY.  Every request carries a different
-- profile (stage 1's out_bytes varies per request and per wrk thread), so the
-- figure measures parsing, solving, serialising and storing a plan, not
-- rematd's cache of the last identical request.  REMAT_BENCH_SAME=1 sends the
-- same body every time instead, to measure that cached path.  REMAT_BENCH_KEYS=1
-- gives every request a new Idempotency-Key (REMAT_BENCH_KEY_PREFIX, then the
-- wrk thread and a counter), to measure the keys' records and their bound.
local f = assert(io.open(os.getenv("REMAT_BENCH_BODY"), "r"))
local body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local same = os.getenv("REMAT_BENCH_SAME") == "1"
local keys = os.getenv("REMAT_BENCH_KEYS") == "1"
local key_prefix = os.getenv("REMAT_BENCH_KEY_PREFIX") or ""
local head, out, tail = body:match('^(.-"name":"layer1","out_bytes":)(%d+)(.*)$')
assert(head, "bench body: layer1's out_bytes not found")
out = tonumber(out)
wrk.body = body

local next_tid = 0
function setup(thread)
    thread:set("tid", next_tid)
    next_tid = next_tid + 1
end

local counter = 0
function request()
    if same then
        return wrk.format()
    end
    counter = counter + 1
    if keys then
        wrk.headers["Idempotency-Key"] = key_prefix .. (tid or 0) .. "-" .. counter
    end
    -- Smaller than the original, so saved_bytes >= out_bytes still holds.
    local v = out - ((counter * 16 + (tid or 0)) % 3000000)
    return wrk.format(nil, nil, nil, head .. v .. tail)
end
