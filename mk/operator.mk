# The operator's benchmark: apply-to-Ready time, RSS, and platform calls per drift interval.
.PHONY: bench-operator

bench-operator: envtest
	$(BIN)/python bench/k8s_operator.py
