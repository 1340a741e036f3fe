# The Helm chart in charts/bundle-operator: `make chart-lint` runs helm lint with each values file the
# tests use, `make chart-template` prints the manifests of the default values (CHART_VALUES=file adds
# a values file). helm is v4.3.1 built from Go modules by `make gitops-tools` (tests/gitops/).
CHART := charts/bundle-operator
CHART_VALUES ?=
CHART_HELM = $(shell $(BIN)/python -c 'from tests.gitops.tools import helm_binary; print(helm_binary())')
CHART_TEST_VALUES := $(wildcard $(CHART)/ci/*-values.yaml)

.PHONY: chart-lint chart-template

chart-lint: gitops-tools
	$(CHART_HELM) lint --strict $(CHART)
	@for values in $(CHART_TEST_VALUES); do \
	  echo "$(CHART_HELM) lint --strict $(CHART) -f $$values"; \
	  $(CHART_HELM) lint --strict $(CHART) -f $$values || exit 1; \
	done

chart-template: gitops-tools
	$(CHART_HELM) template bundle-operator $(CHART) --namespace bundle-operator --include-crds \
	  $(if $(CHART_VALUES),-f $(CHART_VALUES))
