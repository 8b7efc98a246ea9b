# rematd end-to-end tests: each starts the real api/rematd on a free
# loopback port with a temporary data directory and talks HTTP to it with
# curl; responses are checked against openapi.yaml offline (python3 with
# jsonschema and yaml, from deploy/install-deps.sh).
API_TESTS = \
	tests/api/endpoints.sh tests/api/hostile.sh tests/api/jobs.sh \
	tests/api/durability.sh tests/api/supervise.sh tests/api/fastpath.sh \
	tests/api/upgrade.sh tests/api/liveness.sh tests/api/models.sh tests/api/fits.sh \
	tests/api/reuse.sh tests/api/ops.sh tests/api/faults.sh tests/api/solve-limits.sh \
	tests/api/fits-jobs.sh tests/api/tenants.sh tests/api/hfconfig.sh
# Issue 13: worker results against their job, HTTP framing, connection
# slots and deadlines (raw sockets through rawhttp.py).
API_TESTS += tests/api/results.sh tests/api/framing.sh tests/api/connections.sh
# Issue 24: the health listener under a connection flood.
API_TESTS += tests/api/health-listen.sh
# Issue 24: stored plans and Idempotency-Key records within bytes and age.
API_TESTS += tests/api/store-bounds.sh
# Issue 24: uploads under an idle timeout, and in flight under the quota.
API_TESTS += tests/api/uploads.sh
# The contract: every operation of openapi.yaml from its own examples,
# every declared status provoked, every answer validated (contract.py).
API_TESTS += tests/api/contract.sh
# One rank of a data-parallel job (POST /v1/fits with parallel).
API_TESTS += tests/api/fits-sharded.sh
# openapi.yaml as typed clients read it: the types openapi-typescript
# generates, fifteen ordinary uses through openapi-fetch compiled with tsc
# (npm tools pinned, installed once under the build tree; 77 without npm).
API_TESTS += tests/api/typed-client.sh
EXTRA_DIST += tests/api/typed-client/uses.ts
# Bounds on what adds up: request bodies held together; every route's
# solves under the deadline, the memory estimate and cancellation.
API_TESTS += tests/api/body-memory.sh tests/api/solve-routes.sh
# Issue 17: the frontier and timeline pictures, rendered.
API_TESTS += tests/api/pictures.sh
dist_check_SCRIPTS += $(API_TESTS)

# The load-and-fault test: not in make check (it runs SOAK_SECONDS, ten
# minutes by default, and needs the worker).  `make soak SOAK_SECONDS=N`.
EXTRA_DIST += tests/api/soak.sh tests/api/soak.py
SOAK_SECONDS = 600
SOAK_KILL_EVERY = 60
.PHONY: soak
soak: api/rematd
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_KILL_EVERY=$(SOAK_KILL_EVERY) top_srcdir=$(top_srcdir) \
	  top_builddir=$(top_builddir) nice -n 19 $(SHELL) $(top_srcdir)/tests/api/soak.sh
TESTS += $(API_TESTS)
EXTRA_DIST += tests/api/lib.sh tests/api/check_schema.py tests/api/fake-worker.sh \
	tests/api/rawhttp.py tests/api/contract.py tests/api/contract_spec.py tests/api/contract_wire.py \
	tests/api/contract_server.py \
	tests/api/contract-unreachable.txt \
	docs/examples/tiny-model.pt

# The PostgreSQL store (issue 16): the endpoint, job and durability suites
# and the replica tests on a throwaway PostgreSQL with two replicas.  Not in
# make check (which must not need PostgreSQL, and this takes minutes):
# tests/run-all runs it when PostgreSQL is installed; skipped (77) when not.
EXTRA_DIST += tests/api/postgresql.sh tests/api/pg_server.sh tests/api/replicas.sh
.PHONY: check-postgresql
check-postgresql: api/rematd $(PG_UNIT_TESTS)
	top_srcdir=$(top_srcdir) top_builddir=$(top_builddir) $(SHELL) $(top_srcdir)/tests/api/postgresql.sh

# The request limits rematd checks (api/request_limits.h) are the ones
# openapi.yaml states.
dist_check_SCRIPTS += tests/check-limits.sh
TESTS += tests/check-limits.sh

# rematd, the CLI and the worker use remat.h and src/rematx/ only, never
# libremat's private headers or remat__ functions.
dist_check_SCRIPTS += tests/check-includes.sh
TESTS += tests/check-includes.sh

# The routes (api/routes/) use http/http.h's public head of a request and
# its rematd_req_* verbs, never http/http_private.h's tail.
dist_check_SCRIPTS += tests/check-routes.sh
TESTS += tests/check-routes.sh
# No link cycle of rematd's objects spans two folders (nm over the build).
dist_check_SCRIPTS += tests/check-cycles.sh
TESTS += tests/check-cycles.sh

# Unit tests of rematd's pure helpers (cmocka).
check_PROGRAMS += tests/api/test_util
TESTS += tests/api/test_util
tests_api_test_util_SOURCES = tests/api/test_util.c api/util.c api/rematd.h
tests_api_test_util_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS)
tests_api_test_util_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api
tests_api_test_util_LDADD = src/libremat_core.la $(JANSSON_LIBS) $(CMOCKA_LIBS) -lm

# The front door's judgement of a request head and its answers
# (api/http/door.c), at the edges of the limits (cmocka).
check_PROGRAMS += tests/api/test_door
TESTS += tests/api/test_door
tests_api_test_door_SOURCES = tests/api/test_door.c api/http/head.c api/http/problems.c \
	api/util.c api/rematd.h api/http/http_private.h
tests_api_test_door_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -pthread
tests_api_test_door_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api
tests_api_test_door_LDADD = src/libremat_core.la $(MHD_LIBS) $(JANSSON_LIBS) $(CMOCKA_LIBS) -lm \
	-lpthread

# The plan request reader, called as rematd links it (cmocka): it does no
# HTTP, so nothing of rematd is stubbed.
check_PROGRAMS += tests/api/test_plan_request
TESTS += tests/api/test_plan_request
tests_api_test_plan_request_SOURCES = tests/api/test_plan_request.c $(REMATD_READER_SOURCES) \
	api/util.c api/rematd.h
tests_api_test_plan_request_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -pthread
tests_api_test_plan_request_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api
tests_api_test_plan_request_LDADD = src/libremat_core.la src/rematx/librematx.la $(JANSSON_LIBS) \
	$(CMOCKA_LIBS) -lm -lpthread

# The job readers (a profile job's spec, POST /v1/fits), likewise (cmocka).
check_PROGRAMS += tests/api/test_job_readers
TESTS += tests/api/test_job_readers
tests_api_test_job_readers_SOURCES = tests/api/test_job_readers.c $(REMATD_READER_SOURCES) \
	api/util.c api/rematd.h
tests_api_test_job_readers_CFLAGS = $(tests_api_test_plan_request_CFLAGS)
tests_api_test_job_readers_CPPFLAGS = $(tests_api_test_plan_request_CPPFLAGS)
tests_api_test_job_readers_LDADD = $(tests_api_test_plan_request_LDADD)

# The default stages read from an uploaded module's pickle (cmocka).
check_PROGRAMS += tests/api/test_torchpickle
TESTS += tests/api/test_torchpickle
tests_api_test_torchpickle_SOURCES = tests/api/test_torchpickle.c api/torchpickle.c \
	api/torchpickle.h
tests_api_test_torchpickle_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS)
tests_api_test_torchpickle_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api
tests_api_test_torchpickle_LDADD = $(JANSSON_LIBS) $(CMOCKA_LIBS)

# JSON pointers to a member a request named (cmocka).
check_PROGRAMS += tests/api/test_pointer
TESTS += tests/api/test_pointer
tests_api_test_pointer_SOURCES = tests/api/test_pointer.c
tests_api_test_pointer_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_api_test_pointer_LDADD = src/rematx/librematx.la $(JANSSON_LIBS) $(CMOCKA_LIBS) -lm

# The store through its interface, on a temporary data directory (cmocka).
check_PROGRAMS += tests/api/test_store
TESTS += tests/api/test_store
tests_api_test_store_SOURCES = tests/api/test_store.c tests/api/store_plans.h api/util.c \
	$(REMATD_STORE_SOURCES) api/rematd.h
tests_api_test_store_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(SQLITE_CFLAGS) \
	$(LIBPQ_CFLAGS) $(CMOCKA_CFLAGS) -pthread
tests_api_test_store_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api $(REMATD_STORE_CPPFLAGS)
tests_api_test_store_LDADD = src/rematx/librematx.la $(JANSSON_LIBS) $(SQLITE_LIBS) $(LIBPQ_LIBS) \
	$(CMOCKA_LIBS) -lm -lpthread

# The PostgreSQL store with two handles on one database (cmocka): run by
# make check-postgresql on its server; skipped (77) in make check, which
# has none (REMAT_TEST_PG unset).
PG_UNIT_TESTS =
if HAVE_LIBPQ
PG_UNIT_TESTS += tests/api/test_store_pg
check_PROGRAMS += tests/api/test_store_pg
TESTS += tests/api/test_store_pg
tests_api_test_store_pg_SOURCES = tests/api/test_store_pg.c tests/api/store_plans.h api/util.c \
	$(REMATD_STORE_SOURCES) api/rematd.h
tests_api_test_store_pg_CFLAGS = $(tests_api_test_store_CFLAGS)
tests_api_test_store_pg_CPPFLAGS = $(tests_api_test_store_CPPFLAGS)
tests_api_test_store_pg_LDADD = $(tests_api_test_store_LDADD)
endif

# The stored plan record: round trips, truncation, damage (cmocka).
check_PROGRAMS += tests/api/test_codec
TESTS += tests/api/test_codec
tests_api_test_codec_SOURCES = tests/api/test_codec.c api/plan_codec.c api/plan_codec.h
tests_api_test_codec_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS)
tests_api_test_codec_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api -I$(top_srcdir)/tests
tests_api_test_codec_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) \
	$(JANSSON_LIBS) -lm

# The TorchScript archive check on crafted zip files (cmocka).
check_PROGRAMS += tests/api/test_zipcheck
TESTS += tests/api/test_zipcheck
tests_api_test_zipcheck_SOURCES = tests/api/test_zipcheck.c api/zipcheck.c api/zipcheck.h
tests_api_test_zipcheck_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS)
tests_api_test_zipcheck_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api
tests_api_test_zipcheck_LDADD = src/rematx/librematx.la $(JANSSON_LIBS) $(CMOCKA_LIBS)
