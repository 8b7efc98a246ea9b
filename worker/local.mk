# remat-worker: the C main loop (main.c) and the C++ over libtorch behind
# shim.h, one file per job (worker/shim_private.h lists them).  It links
# libremat for the op lists it runs and rematx for the zoo and the buffer.
# Built only when configure found libtorch (m4/remat_torch.m4); everything
# else builds without it.
EXTRA_DIST += worker/build-standalone.sh worker/allowed-ops.py docs/worker.md docs/accuracy.md docs/security.md
if HAVE_TORCH
bin_PROGRAMS += worker/remat-worker
worker_remat_worker_SOURCES = worker/main.c worker/http.h worker/http.c worker/cache.h worker/cache.c \
	worker/sandbox.h worker/sandbox_private.h worker/sandbox.c \
	worker/confine.c worker/shim.h worker/shim_private.h \
	worker/shim.cpp worker/device.cpp worker/model.cpp worker/layers.h worker/layers.cpp \
	worker/opcheck.cpp worker/allowed_ops.h \
	worker/graph.h worker/graph.cpp worker/hf.h worker/hf.cpp worker/measure.cpp worker/execute.cpp worker/optim.cpp
# The program is C but links C++ (libtorch): make automake use the C++ linker.
nodist_EXTRA_worker_remat_worker_SOURCES = dummy.cxx
worker_remat_worker_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CURL_CFLAGS) $(SECCOMP_CFLAGS)
worker_remat_worker_CXXFLAGS = $(AM_CXXFLAGS) $(JANSSON_CFLAGS)
worker_remat_worker_CPPFLAGS = $(AM_CPPFLAGS) $(TORCH_CPPFLAGS)
worker_remat_worker_LDADD = src/libremat_core.la $(TORCH_LIBS) $(CURL_LIBS) $(JANSSON_LIBS) $(SECCOMP_LIBS) -lm \
	-lpthread
endif
