# rematd, the HTTP planning service: one api/routes/*.c per route (tmux
# style), each exporting one const struct rematd_route; routes/table.c lists
# them for the HTTP layer (api/http/).  openapi.yaml is embedded at build
# time as a generated C array.
#
# The store (api/store/, in folders the way curl keeps lib/vtls/): one
# interface (store.c) over the SQLite backend (sqlite/) and, when configure
# found libpq, the PostgreSQL one (pg/; docs/deploy.md).  The rest of
# rematd includes store.h through REMATD_STORE_CPPFLAGS.
REMATD_STORE_SOURCES = api/store/store.h api/store/store_backend.h api/store/store.c \
	api/store/values.c api/store/group.h api/store/group.c \
	api/store/sqlite/sqlite.h api/store/sqlite/sqlite.c api/store/sqlite/schema.c \
	api/store/sqlite/writer.c api/store/sqlite/plans.c api/store/sqlite/jobs.c \
	api/store/sqlite/idem.c api/store/sqlite/models.c api/store/sqlite/bounds.c
if HAVE_LIBPQ
REMATD_STORE_SOURCES += api/store/pg/pg.h api/store/pg/pg.c api/store/pg/schema.c \
	api/store/pg/idem.c api/store/pg/jobs.c api/store/pg/models.c \
	api/store/pg/bounds.c
endif
REMATD_STORE_CPPFLAGS = -I$(top_srcdir)/api/store
# The readers (no HTTP inside: they fill a struct rematd_problem), which the
# unit tests and fuzz targets link as they are.
REMATD_READER_SOURCES = api/problem.h api/problem.c api/plans/request.h api/plans/request.c \
	api/jobs/fits.h api/jobs/fits_read.c api/jobs/fits_sharded.c api/jobs/profile_spec.h api/jobs/profile_spec.c
# The HTTP layer (api/http/): connections, framing, requests, answers,
# problems, Idempotency-Key.  http.h is all a route may use of it.
REMATD_HTTP_SOURCES = api/http/http.h api/http/http_private.h api/http/request.c \
	api/http/response.c api/http/problems.c api/http/idempotency.c api/http/conn.c \
	api/http/door.c api/http/head.c
# The routes (api/routes/): one file per route, each exporting one const
# struct rematd_route.
REMATD_ROUTE_SOURCES = api/routes/table.c api/routes/healthz.c api/routes/readyz.c \
	api/routes/openapi.c api/routes/metrics.c api/routes/models_list.c api/routes/models_upload.c \
	api/routes/models_get.c api/routes/models_delete.c api/routes/plans_create.c \
	api/routes/plans_get.c api/routes/plans_timeline.c api/routes/profiles_create.c \
	api/routes/profiles_get.c api/routes/profiles_frontier.c api/routes/fits_create.c \
	api/routes/fits_get.c api/routes/validations_create.c api/routes/validations_get.c \
	api/routes/worker_lease.c api/routes/worker_heartbeat.c api/routes/worker_complete.c \
	api/routes/worker_fail.c api/routes/worker_release.c api/routes/worker_models.c
bin_PROGRAMS += api/rematd
api_rematd_SOURCES = \
	api/rematd.h api/main.c api/config.c api/util.c api/tenants.h api/tenants.c $(REMATD_HTTP_SOURCES) $(REMATD_STORE_SOURCES) \
	api/zipcheck.h api/zipcheck.c api/torchpickle.h api/torchpickle.c api/models_common.h api/models_common.c \
	api/metrics.c api/supervise.h api/supervise.c api/pool.h api/pool.c \
	api/plan_common.h api/plan_common.c api/request_limits.h \
	api/plan_cache.h api/plan_cache.c api/plan_codec.h api/plan_codec.c api/jobs_common.h api/jobs_common.c \
	api/worker_common.h api/worker_common.c api/worker_check.h api/worker_check.c \
	$(REMATD_READER_SOURCES) api/read_ctx.h api/read_ctx.c api/jobs/fits.c $(REMATD_ROUTE_SOURCES)
nodist_api_rematd_SOURCES = api/openapi.c
api_rematd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/api -DREMATD_BINDIR='"$(bindir)"'
api_rematd_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(SQLITE_CFLAGS) $(LIBPQ_CFLAGS) \
	-pthread
# The static convenience library: ./api/rematd in the build tree is the
# real program (no libtool wrapper), which the kill -9 test relies on.
api_rematd_LDADD = src/libremat_core.la $(MHD_LIBS) $(JANSSON_LIBS) $(SQLITE_LIBS) $(LIBPQ_LIBS) \
	-lm -lpthread
api_rematd_CPPFLAGS += $(REMATD_STORE_CPPFLAGS)
CLEANFILES += api/openapi.c api/openapi.c.tmp

# The contract, as bytes in the binary: GET /openapi.yaml serves it even
# when rematd runs from the build tree with nothing installed.
api/openapi.c: $(top_srcdir)/openapi.yaml
	$(AM_V_GEN)$(MKDIR_P) api && { \
	  echo '/* Generated from openapi.yaml by make; do not edit. */'; \
	  echo '#include <stddef.h>'; \
	  echo 'const unsigned char rematd_openapi_yaml[] = {'; \
	  od -An -v -tx1 $(top_srcdir)/openapi.yaml | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; \
	  echo 'const size_t rematd_openapi_yaml_len = sizeof rematd_openapi_yaml - 1;'; \
	} > $@.tmp && mv $@.tmp $@

EXTRA_DIST += api/bench-http.sh api/bench-plan.lua api/bench-compare.sh
BENCH_TARGETS += bench-http
bench-http: api/rematd
	$(SHELL) $(top_srcdir)/api/bench-http.sh $(builddir)/api/rematd $(top_srcdir)
dist_doc_DATA += docs/api.md docs/jobs.md docs/architecture.md docs/models.md

# A developer's lint of the contract (needs the npm registry, so it is not
# part of make check): Redocly's recommended rules, a warning failing it as
# an error does (redocly exits 0 on warnings).
.PHONY: lint-openapi
lint-openapi:
	@out=$$(npx -y @redocly/cli@latest lint $(top_srcdir)/openapi.yaml 2>&1); st=$$?; \
	  printf '%s\n' "$$out"; \
	  if [ $$st -ne 0 ]; then exit $$st; fi; \
	  if printf '%s\n' "$$out" | grep -q 'Warning was generated'; then \
	    echo "lint-openapi: warnings"; exit 1; fi
