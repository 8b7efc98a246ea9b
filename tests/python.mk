# The Python package (python/remat) and its tests (tests/python/, pytest
# under tests/python.sh; skipped without a python3 that has torch and
# pytest).
dist_check_SCRIPTS += tests/python.sh
TESTS += tests/python.sh
REMAT_PY_FILES = python/remat/__init__.py python/remat/_plan.py python/remat/_apply.py \
	python/remat/_profile.py python/remat/_exports.py python/remat/_one.py \
	python/remat/client.py python/remat/_exceptions.py python/remat/_graph.py
EXTRA_DIST += $(REMAT_PY_FILES) python/pyproject.toml python/README.md \
	tests/python/conftest.py tests/python/chains.py tests/python/test_apply.py \
	tests/python/test_client.py tests/python/test_exports.py tests/python/test_profile.py \
	tests/python/test_e2e.py tests/python/test_layers.py tests/python/test_exceptions.py \
	tests/python/models.py tests/python/test_anymodel.py \
	bench/python-apply.py docs/python.md

# `make install` puts the package in the site-packages of $(PYTHON3) under
# $(prefix) (pip install ./python is the other way, docs/python.md).
remat_py_dir = `$(PYTHON3) -c 'import sysconfig; print(sysconfig.get_path("purelib", vars={"base": "$(prefix)", "platbase": "$(prefix)"}))'`/remat
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
