# rematd, the HTTP planning service: one api/route_*.c per route (tmux
# style), each exporting one const struct rematd_route; http.c holds the
# table.  openapi.yaml is embedded at build time as a generated C array.
#
# The store (api/store/, in folders the way curl keeps lib/vtls/): one
# interface (store.c) over the SQLite backend (sqlite/) and, when configure
# found libpq, the PostgreSQL one (pg/; docs/deploy.md).  The rest of
# rematd includes store.h through REMATD_STORE_CPPFLAGS.
REMATD_STORE_SOURCES = api/store/store.h api/store/store_backend.h api/store/store.c \
	api/store/values.c api/store/group.h api/store/group.c \
	api/store/sqlite/sqlite.h api/store/sqlite/sqlite.c api/store/sqlite/schema.c \
	api/store/sqlite/writer.c api/store/sqlite/plans.c api/store/sqlite/jobs.c \
	api/store/sqlite/idem.c api/store/sqlite/models.c
if HAVE_LIBPQ
REMATD_STORE_SOURCES += api/store/pg/pg.h api/store/pg/pg.c api/store/pg/schema.c \
	api/store/pg/idem.c api/store/pg/jobs.c api/store/pg/models.c
endif
REMATD_STORE_CPPFLAGS = -I$(top_srcdir)/api/store
bin_PROGRAMS += api/rematd
api_rematd_SOURCES = \
	api/rematd.h api/main.c api/config.c api/http.c api/util.c $(REMATD_STORE_SOURCES) \
	api/zipcheck.h api/zipcheck.c api/torchpickle.h api/torchpickle.c api/models_common.h api/models_common.c \
	api/metrics.c api/supervise.c api/pool.c \
	api/plan_common.h api/plan_common.c api/plan_request.h api/plan_request.c api/request_limits.h \
	api/plan_cache.h api/plan_cache.c api/plan_codec.h api/plan_codec.c api/jobs_common.h api/jobs_common.c \
	api/worker_common.h api/worker_common.c api/worker_check.h api/worker_check.c \
	api/route_healthz.c api/route_readyz.c api/route_openapi.c api/route_metrics.c \
	api/route_models.c api/route_plans_create.c api/route_plans_get.c \
	api/route_plans_timeline.c api/route_profiles_create.c api/route_profiles_get.c \
	api/route_validations_create.c api/route_validations_get.c api/route_worker_lease.c \
	api/route_worker_heartbeat.c api/route_worker_complete.c api/route_worker_fail.c \
	api/route_worker_release.c api/route_models_upload.c api/route_models_get.c \
	api/route_models_delete.c api/route_worker_models.c api/route_fits.c \
	api/route_profiles_frontier.c
nodist_api_rematd_SOURCES = api/openapi.c
api_rematd_CPPFLAGS = $(AM_CPPFLAGS) -DREMATD_BINDIR='"$(bindir)"'
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
