# remat-worker's tests (tests/worker/): end to end against the real rematd on
# loopback, the CPU accuracy bound of docs/accuracy.md, and how a plan's op
# list is read and checked.  They need libtorch; the GPU scripts
# (tests/worker/gpu-*.sh, their set-up in gpu-common.sh) are documentation's,
# run by hand on a GPU machine.
EXTRA_DIST += tests/worker/e2e.py tests/worker/accuracy-ci.sh tests/worker/accuracy.sh \
	tests/worker/gpu-accuracy.sh tests/worker/compare-timeline.py tests/worker/plan-check.py \
	tests/worker/models-e2e.py tests/worker/hostile-models.py tests/worker/gpu-time.sh tests/worker/side-by-side.py \
	tests/worker/step-noise.sh tests/worker/optim-e2e.py tests/worker/gpu-side-by-side.sh \
	tests/worker/gpu-common.sh tests/worker/gpu-all.sh tests/worker/gpu-hf.sh \
	tests/worker/side-by-side-check.py tests/worker/lib.py bench/profile-speed.py tests/worker/fits-e2e.py tests/worker/hf-e2e.py tests/worker/graph-e2e.py \
	docs/side-by-side-gpt-m-b2.svg docs/side-by-side-gpt-s-b2.svg docs/side-by-side-resnet101-b2.svg \
	docs/side-by-side-vgg19-b1.svg \
	docs/side-by-side-resnet152-b2.svg docs/side-by-side-resnet50-b2.svg \
	docs/side-by-side-h200-gpt-24-b4.svg docs/side-by-side-h200-gpt-b8.svg \
	docs/side-by-side-h200-resnet101-b32.svg docs/side-by-side-h200-resnet152-b32.svg \
	docs/side-by-side-h200-resnet50-b32-bf16.svg docs/side-by-side-h200-resnet50-b32.svg \
	docs/side-by-side-h200-vgg19-b64-fp16.svg docs/side-by-side-h200-vgg19-b64.svg docs/data/h200
if HAVE_TORCH
TESTS += tests/worker/e2e.py tests/worker/accuracy-ci.sh tests/worker/plan-check.py \
	tests/worker/models-e2e.py tests/worker/optim-e2e.py tests/worker/side-by-side-check.py \
	tests/worker/fits-e2e.py tests/worker/hostile-models.py \
	tests/worker/hf-e2e.py tests/worker/graph-e2e.py

# The operator allow-list's checker on modules compiled from TorchScript
# source in the test (no Python), and the list's own consistency.
check_PROGRAMS += tests/worker/test_opcheck
TESTS += tests/worker/test_opcheck
tests_worker_test_opcheck_SOURCES = tests/worker/test_opcheck.cpp worker/opcheck.cpp \
	worker/allowed_ops.h worker/shim_private.h
tests_worker_test_opcheck_CPPFLAGS = $(AM_CPPFLAGS) $(TORCH_CPPFLAGS)
tests_worker_test_opcheck_CXXFLAGS = $(AM_CXXFLAGS) $(JANSSON_CFLAGS)
tests_worker_test_opcheck_LDADD = $(TORCH_LIBS) $(JANSSON_LIBS) -lpthread

# Stage discovery in an uploaded module's forward graph, on modules
# compiled from TorchScript source in the test (no Python).
check_PROGRAMS += tests/worker/test_graph
TESTS += tests/worker/test_graph
tests_worker_test_graph_SOURCES = tests/worker/test_graph.cpp worker/graph.cpp worker/graph.h \
	worker/shim_private.h
tests_worker_test_graph_CPPFLAGS = $(AM_CPPFLAGS) $(TORCH_CPPFLAGS)
tests_worker_test_graph_CXXFLAGS = $(AM_CXXFLAGS) $(JANSSON_CFLAGS)
tests_worker_test_graph_LDADD = $(TORCH_LIBS) $(JANSSON_LIBS) -lpthread
endif

# The sandbox of uploaded models, one system call at a time (sandbox.c and
# confine.c without libtorch: the shim's calls are stubs in the test).
check_PROGRAMS += tests/worker/test_sandbox
TESTS += tests/worker/test_sandbox
tests_worker_test_sandbox_SOURCES = tests/worker/test_sandbox.c worker/sandbox.c worker/confine.c \
	worker/sandbox.h worker/sandbox_private.h
tests_worker_test_sandbox_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) $(SECCOMP_CFLAGS)
tests_worker_test_sandbox_LDADD = src/libremat_core.la $(SECCOMP_LIBS) $(CMOCKA_LIBS) $(JANSSON_LIBS) \
	-lpthread -lm

# One FSDP rank measured on GPUs (docs/scheduling.md, "Sharded jobs").
EXTRA_DIST += tests/worker/gpu-sharded.sh tests/worker/sharded_gpu.py
