# The CustomResourceDefinitions in crds/, rendered from the pydantic models of the custom resources
# (operator/bundle_operator/k8s/resources.py); tests/unit/k8s/test_crds.py fails when they are stale.
.PHONY: crds

crds: $(STAMP)
	$(BIN)/python -m bundle_operator.k8s.crdgen crds
