# The documentation site (mkdocs.yml, docs/): `make docs` builds it in strict mode into tmp/site;
# `make docs-reference` rewrites docs/reference/'s generated pages from the code
# (tests/unit/docs/test_reference_current.py fails when they are stale); `make docs-serve` previews it.
.PHONY: docs docs-reference docs-serve

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir tmp/site

docs-reference: $(STAMP)
	$(BIN)/python -m bundle_operator.docgen docs

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict

# Screenshots of the built site with headless Chromium (Debian's chromium package, installed when
# missing and run as root): the front page and a reference page, into tmp/screenshots/.
.PHONY: docs-screenshots
docs-screenshots: docs
	$(BIN)/python scripts/docs_screenshots.py $(PAGES)
