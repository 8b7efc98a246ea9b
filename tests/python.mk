# The Python package (python/remat) and its tests (tests/python/, pytest
# under tests/python.sh; skipped without a python3 that has torch and
# pytest).
dist_check_SCRIPTS += tests/python.sh tests/python-install.sh
TESTS += tests/python.sh tests/python-install.sh
# configure's interpreter, for tests/python.sh and tests/python-install.sh.
AM_TESTS_ENVIRONMENT += PYTHON3='$(PYTHON3)' PYTHON3_TORCH='$(PYTHON3_TORCH)' \
	PYTHON3_HOW='$(PYTHON3_HOW)' MAKE='$(MAKE)'; export PYTHON3 PYTHON3_TORCH PYTHON3_HOW MAKE;
REMAT_PY_FILES = python/remat/__init__.py python/remat/_plan.py python/remat/_apply.py \
	python/remat/_profile.py python/remat/_exports.py python/remat/_one.py \
	python/remat/client.py python/remat/_exceptions.py python/remat/_graph.py \
	python/remat/_trace.py
EXTRA_DIST += $(REMAT_PY_FILES) python/pyproject.toml python/README.md \
	tests/python/conftest.py tests/python/chains.py tests/python/test_apply.py \
	tests/python/test_client.py tests/python/test_exports.py tests/python/test_profile.py \
	tests/python/test_e2e.py tests/python/test_layers.py tests/python/test_exceptions.py \
	tests/python/models.py tests/python/test_anymodel.py python/install-dir.py \
	bench/python-apply.py bench/python-models.py docs/python.md

# `make install` puts the package where $(PYTHON3) (configure's pick: the
# python3 that imports torch) imports it from under $(prefix): on Debian
# /usr/local/lib/python3.X/dist-packages for /usr/local and
# /usr/lib/python3/dist-packages for /usr (python/install-dir.py says why
# sysconfig's own answer is wrong there).  pip install ./python is the
# other way (docs/python.md).
remat_py_dir = `$(PYTHON3) $(srcdir)/python/install-dir.py "$(prefix)"`/remat
install-data-local:
	@if test -n "$(PYTHON3)"; then \
	  d="$(DESTDIR)$(remat_py_dir)"; \
	  echo " $(MKDIR_P) $$d"; $(MKDIR_P) "$$d" || exit 1; \
	  for f in $(REMAT_PY_FILES); do \
	    $(INSTALL_DATA) "$(srcdir)/$$f" "$$d/" || exit 1; done; \
	fi
uninstall-local:
	@if test -n "$(PYTHON3)"; then \
	  d="$(DESTDIR)$(remat_py_dir)"; \
	  for f in $(REMAT_PY_FILES); do rm -f "$$d/`basename $$f`"; done; \
	  rm -rf "$$d/__pycache__"; rmdir "$$d" 2>/dev/null || :; \
	fi

# DDP and ZeRO-1 ranks measured over gloo (docs/scheduling.md, "Sharded jobs"):
# /usr/bin/python3 tests/python/sharded_gloo.py, by hand (about a minute).
EXTRA_DIST += tests/python/sharded_gloo.py
