-- wrk script for make bench-http: POST /v1/plans with the body in the file
-- named by REMAT_BENCH_BODY (a 50-stage profile).
local f = assert(io.open(os.getenv("REMAT_BENCH_BODY"), "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
