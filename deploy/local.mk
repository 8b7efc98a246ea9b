# deploy/: the systemd unit (made from rematd.service.in with the configured
# bindir), Dockerfiles, Kubernetes manifests, and their tests (tests/deploy/).
# tests/deploy/podman.py builds and runs the images; it is slow and needs
# rootful podman, so tests/run-all runs it after distcheck, not make check.
noinst_DATA = deploy/rematd.service
CLEANFILES += deploy/rematd.service
deploy/rematd.service: $(top_srcdir)/deploy/rematd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) deploy && sed -e 's|@''bindir@|$(bindir)|g' -e 's|@''docdir@|$(docdir)|g' \
	  $(top_srcdir)/deploy/rematd.service.in >$@.tmp && mv $@.tmp $@

DEPLOY_TESTS = tests/deploy/k8s.sh tests/deploy/systemd.sh
dist_check_SCRIPTS += $(DEPLOY_TESTS)
TESTS += $(DEPLOY_TESTS)
dist_doc_DATA += docs/deploy.md
EXTRA_DIST += .dockerignore deploy/install-deps.sh deploy/make-base.sh deploy/rematd.service.in \
	deploy/Dockerfile.rematd deploy/Dockerfile.worker-cpu deploy/Dockerfile.worker-cuda \
	deploy/compose.yaml deploy/compose.gpu.yaml \
	deploy/k8s/base/kustomization.yaml deploy/k8s/base/rematd.yaml deploy/k8s/base/worker.yaml \
	deploy/k8s/base/networkpolicy.yaml deploy/k8s/overlays/cpu/kustomization.yaml \
	deploy/k8s/overlays/gpu/kustomization.yaml deploy/k8s/overlays/postgresql/kustomization.yaml \
	deploy/k8s/overlays/postgresql/pdb.yaml deploy/k8s/overlays/postgresql/postgres-example.yaml \
	tests/deploy/k8s_check.py tests/deploy/k8s-schema.js tests/deploy/podman.py

# A developer's schema check of the rendered manifests (needs the npm
# registry once, so it is not part of make check; once run, tests/deploy/k8s.sh
# uses what it installed): kubernetes-models' Kubernetes API schemas.
.PHONY: lint-k8s
lint-k8s:
	$(MKDIR_P) lint-k8s
	cd lint-k8s && { test -d node_modules/kubernetes-models && test -d node_modules/yaml || \
	  npm install --no-save --no-audit --no-fund --silent kubernetes-models@4 yaml@2; }
	for o in cpu gpu; do kubectl kustomize $(abs_top_srcdir)/deploy/k8s/overlays/$$o >lint-k8s/$$o.yaml || exit 1; done
	NODE_PATH=lint-k8s/node_modules node $(top_srcdir)/tests/deploy/k8s-schema.js lint-k8s/cpu.yaml lint-k8s/gpu.yaml

clean-local: clean-lint-k8s
.PHONY: clean-lint-k8s
clean-lint-k8s:
	rm -rf lint-k8s
