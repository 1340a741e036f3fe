# The operator's benchmarks: apply-to-Ready time, RSS, and platform calls per drift interval, for
# one installation at a time (bench-operator) and for a fleet applied at once (bench-scale; pass
# options with SCALE_ARGS, e.g. make bench-scale SCALE_ARGS="--count 1000"), and the admission webhook's
# latency for a small and the largest accepted document (bench-admission). bench-chaos keeps a fleet
# under random faults and checks what must hold afterwards (CHAOS_ARGS, e.g. "--minutes 2").
.PHONY: bench-operator bench-scale bench-admission bench-chaos

SCALE_ARGS ?=
CHAOS_ARGS ?=

bench-operator: envtest
	$(BIN)/python bench/k8s_operator.py

bench-scale: envtest gitops-tools
	$(BIN)/python bench/scale.py $(SCALE_ARGS)

bench-admission: $(STAMP)
	$(BIN)/python bench/admission.py

bench-chaos: envtest
	$(BIN)/python bench/chaos.py $(CHAOS_ARGS)
