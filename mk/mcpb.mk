# The official mcpb CLI (npm @anthropic-ai/mcpb), pinned by tests/tools/mcpb/package-lock.json,
# for the .mcpb integration tests; `npm ci` installs exactly the locked tree into that folder.
MCPB_TOOLS := tests/tools/mcpb
MCPB_TOOLS_STAMP := $(MCPB_TOOLS)/node_modules/.installed-stamp

.PHONY: mcpb-tools bench-mcpb

$(MCPB_TOOLS_STAMP): $(MCPB_TOOLS)/package.json $(MCPB_TOOLS)/package-lock.json
	cd $(MCPB_TOOLS) && npm ci --no-audit --no-fund --ignore-scripts
	@touch $@

mcpb-tools: $(MCPB_TOOLS_STAMP)

# Inspect throughput of a 128 MiB archive against sha256sum, and peak memory at 16 and 128 MiB.
bench-mcpb: $(STAMP)
	$(BIN)/python bench/mcpb.py

TEST_PREREQS += mcpb-tools
