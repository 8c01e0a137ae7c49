-- wrk script: POST a small op job to numvald (bench/http_bench.sh).
-- The bearer token comes from the environment (NUMVAL_TOKEN, scope submit);
-- wrk counts any answer other than 2xx/3xx under "Non-2xx or 3xx responses",
-- and http_bench.sh checks that count is zero and that the store holds every
-- job wrk saw answered.
local token = os.getenv("NUMVAL_TOKEN")
if not token or token == "" then
  error("NUMVAL_TOKEN is not set")
end
wrk.method = "POST"
wrk.path = "/api/v1/jobs"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
-- A small op job as CI submits it: one op, one dtype, one shape, a build identity.
wrk.body = '{"kind":"op","op":"exp","dtypes":["fp32"],"shapes":[[16]],"seed":1,' ..
           '"build":{"name":"kernels","version":"1.2","commit":"abc123"}}'
