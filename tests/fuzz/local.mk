# libFuzzer targets (tests/fuzz/*.c), their seed corpora
# (tests/fuzz/corpus/<target>/) and `make fuzz`.
#
# configure --enable-fuzz (clang) links them with libFuzzer: `make fuzz
# FUZZ_SECONDS=N` runs each for N seconds, one after the other, keeping
# what it finds in fuzz-corpus/<target>/ of the build tree (seeded from the
# checked-in corpus).  Without --enable-fuzz they link tests/fuzz/replay.c
# instead and make check replays the checked-in corpus through them
# (tests/fuzz/replay.sh), so every input once found stays a test.
FUZZ_TARGETS = tests/fuzz/fuzz_profile tests/fuzz/fuzz_solve tests/fuzz/fuzz_codec \
	tests/fuzz/fuzz_result tests/fuzz/fuzz_plan_request tests/fuzz/fuzz_zip tests/fuzz/fuzz_pickle
check_PROGRAMS += $(FUZZ_TARGETS)
if FUZZ
FUZZ_MAIN =
else
FUZZ_MAIN = tests/fuzz/replay.c
endif
FUZZ_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/api
FUZZ_LIBS = src/libremat_core.la $(JANSSON_LIBS) -lm
FUZZ_LINK = $(FUZZ_LDFLAGS)

tests_fuzz_fuzz_profile_SOURCES = tests/fuzz/fuzz_profile.c tests/fuzz/fuzz_check.h $(FUZZ_MAIN)
tests_fuzz_fuzz_profile_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_profile_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_profile_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_solve_SOURCES = tests/fuzz/fuzz_solve.c tests/fuzz/fuzz_check.h $(FUZZ_MAIN)
tests_fuzz_fuzz_solve_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_solve_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_solve_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_codec_SOURCES = tests/fuzz/fuzz_codec.c tests/fuzz/fuzz_check.h api/plan_codec.c \
	api/plan_codec.h $(FUZZ_MAIN)
tests_fuzz_fuzz_codec_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_codec_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_codec_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_result_SOURCES = tests/fuzz/fuzz_result.c tests/fuzz/fuzz_check.h \
	api/worker_check.c api/worker_check.h $(FUZZ_MAIN)
tests_fuzz_fuzz_result_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_result_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_result_LDADD = $(FUZZ_LIBS)

# The reader as rematd links it (api/local.mk's REMATD_READER_SOURCES), with
# nothing of rematd stubbed: it does no HTTP and looks nothing up itself.
tests_fuzz_fuzz_plan_request_SOURCES = tests/fuzz/fuzz_plan_request.c tests/fuzz/fuzz_check.h \
	$(REMATD_READER_SOURCES) api/util.c $(FUZZ_MAIN)
tests_fuzz_fuzz_plan_request_CFLAGS = $(FUZZ_CFLAGS) -pthread
tests_fuzz_fuzz_plan_request_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_plan_request_LDADD = $(FUZZ_LIBS) src/rematx/librematx.la -lpthread

tests_fuzz_fuzz_zip_SOURCES = tests/fuzz/fuzz_zip.c tests/fuzz/fuzz_check.h api/zipcheck.c \
	api/zipcheck.h api/torchpickle.c api/torchpickle.h $(FUZZ_MAIN)
tests_fuzz_fuzz_zip_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_zip_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_zip_LDADD = src/rematx/librematx.la $(FUZZ_LIBS)

tests_fuzz_fuzz_pickle_SOURCES = tests/fuzz/fuzz_pickle.c tests/fuzz/fuzz_check.h \
	api/torchpickle.c api/torchpickle.h $(FUZZ_MAIN)
tests_fuzz_fuzz_pickle_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_pickle_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_pickle_LDADD = $(FUZZ_LIBS)

TESTS += tests/fuzz/replay.sh
# replay.sh keeps each target's output next to it for the log of a failure.
CLEANFILES += $(FUZZ_TARGETS:=.replay)
dist_check_SCRIPTS += tests/fuzz/replay.sh
EXTRA_DIST += tests/fuzz/corpus

.PHONY: fuzz
FUZZ_SECONDS = 60
# FUZZ_RUNS=N runs each target for N executions instead (the long runs of
# README.md: FUZZ_RUNS=10000000); FUZZ_ONLY="fuzz_solve fuzz_result" runs
# only those.
FUZZ_RUNS =
FUZZ_ONLY =
# One target at a time (they would share the CPUs), each for FUZZ_SECONDS,
# then its final statistics (executions, corpus size).
fuzz: $(FUZZ_TARGETS)
if FUZZ
	@lim=-max_total_time=$(FUZZ_SECONDS); \
	if [ -n "$(FUZZ_RUNS)" ]; then lim=-runs=$(FUZZ_RUNS); fi; \
	for t in $(FUZZ_TARGETS); do \
	  n=$${t##*/}; mkdir -p fuzz-corpus/$$n; \
	  if [ -n "$(FUZZ_ONLY)" ]; then case " $(FUZZ_ONLY) " in *" $$n "*) ;; *) continue ;; esac; fi; \
	  echo "### $$n: $$lim"; \
	  $$t $$lim -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=fuzz-corpus/$$n- fuzz-corpus/$$n $(top_srcdir)/tests/fuzz/corpus/$$n \
	    2>fuzz-corpus/$$n.log || { tail -50 fuzz-corpus/$$n.log; exit 1; }; \
	  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb|new_units_added)' \
	    fuzz-corpus/$$n.log; \
	done
else
	@echo "make fuzz needs a build configured with --enable-fuzz (clang with libFuzzer)"; exit 1
endif
