# The CustomResourceDefinitions in crds/, rendered from the pydantic models of the custom resources
# (operator/bundle_operator/k8s/resources.py); tests/unit/k8s/test_crds.py fails when they are stale.
# The chart ships the same files in charts/bundle-operator/crds/ (tests/unit/test_chart_crds.py
# checks the bytes), so `make crds` refreshes that copy too.
.PHONY: crds

CHART_CRDS := charts/bundle-operator/crds

crds: $(STAMP)
	$(BIN)/python -m bundle_operator.k8s.crdgen crds
	mkdir -p $(CHART_CRDS)
	rm -f $(CHART_CRDS)/*.yaml
	cp crds/*.yaml $(CHART_CRDS)/
