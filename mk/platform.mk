# The reference agent platform: run it in the foreground, or benchmark it through the client
# (bench-platform) and its gateway's tools/call against calling the member directly (bench-gateway).
PLATFORM_PORT ?= 8080
PLATFORM_DB ?= $(CURDIR)/tmp/platform/platform.db

.PHONY: platform-serve bench-platform bench-gateway

platform-serve: $(STAMP)
	$(BIN)/bundlectl platform serve --port $(PLATFORM_PORT) --db $(PLATFORM_DB)

bench-platform: $(STAMP)
	$(BIN)/python bench/platform_api.py

bench-gateway: $(STAMP)
	$(BIN)/python bench/gateway.py
