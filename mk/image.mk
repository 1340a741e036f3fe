# The container image (Dockerfile, docs/how-to/image.md) and its lock file.
#
# requirements.lock pins every runtime dependency of pyproject.toml ([project].dependencies,
# transitively; not the dev extras) with hashes. `make lock` regenerates it with pip-compile from
# pip-tools, installed into a throwaway venv under tmp/ (never into .venv, never a project
# dependency), on CPython 3.11, the image's Python. It keeps the pins the file already has;
# `make lock LOCK_ARGS=--upgrade` (or `LOCK_ARGS='--upgrade-package NAME'`) moves them.
LOCK_FILE := requirements.lock
LOCK_TOOLS := tmp/lock-tools
LOCK_PYTHON ?= $(PYTHON)
LOCK_PIP_VERSION ?= 26.3
LOCK_PIP_TOOLS_VERSION ?= 7.6.2
LOCK_STAMP := $(LOCK_TOOLS)/.installed-pip-tools-$(LOCK_PIP_TOOLS_VERSION)-pip-$(LOCK_PIP_VERSION)
LOCK_ARGS ?=
# PIP_FIND_LINKS is emptied so that only PyPI's files (and their hashes) enter the lock.
LOCK_COMPILE := PIP_FIND_LINKS= CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_TOOLS)/bin/pip-compile \
	--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url
BUILD_LOCK_FILE := requirements-build.lock

.PHONY: lock image image-base

$(LOCK_STAMP):
	@$(LOCK_PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else \
	  "make lock: LOCK_PYTHON must be CPython 3.11 (the image'"'"'s Python), not " + sys.version.split()[0])'
	rm -rf $(LOCK_TOOLS)
	$(LOCK_PYTHON) -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/python -m pip install --quiet 'pip==$(LOCK_PIP_VERSION)'
	$(LOCK_TOOLS)/bin/python -m pip install --quiet 'pip-tools==$(LOCK_PIP_TOOLS_VERSION)'
	@touch $@

# pip-compile writes the whole file anew, its own header included; the lines before it say how it was made.
lock: $(LOCK_STAMP)
	$(LOCK_COMPILE) $(LOCK_ARGS) --output-file $(LOCK_FILE) pyproject.toml
	@{ \
	  echo '# requirements.lock: every runtime dependency of bundle-operator ([project].dependencies in'; \
	  echo '# pyproject.toml, transitively; not the dev extras), pinned and hashed, for the container image.'; \
	  echo '# Made by `make lock` (mk/image.mk): pip-compile --generate-hashes --allow-unsafe --strip-extras'; \
	  echo '# from pip-tools $(LOCK_PIP_TOOLS_VERSION), run on CPython 3.11 from a throwaway venv in $(LOCK_TOOLS)/, with'; \
	  echo '# PyPI as the only index. Do not edit by hand: change pyproject.toml and run `make lock` (it keeps'; \
	  echo '# these pins; `make lock LOCK_ARGS=--upgrade` moves them).'; \
	  echo '# Linux x86_64 and aarch64 alike: the hashes cover every file PyPI has for each pin (so the cp311,'; \
	  echo '# abi3 and py3 wheels of both architectures), and no dependency has a platform_machine marker,'; \
	  echo '# so both resolve to exactly this set. Install it with'; \
	  echo '#   pip install --require-hashes --no-deps --only-binary=:all: -r requirements.lock'; \
	  cat $(LOCK_FILE); \
	} > $(LOCK_TOOLS)/lock.tmp
	mv $(LOCK_TOOLS)/lock.tmp $(LOCK_FILE)
	$(LOCK_COMPILE) $(LOCK_ARGS) --only-build-deps --build-deps-for=wheel --output-file $(BUILD_LOCK_FILE) pyproject.toml
	@{ \
	  echo '# requirements-build.lock: the tools that build bundle-operator'"'"'s wheel in the image ([build-system]'; \
	  echo '# requires of pyproject.toml and what the backend asks for a wheel), pinned and hashed, so the image'; \
	  echo '# never builds with whatever setuptools its base ships. Made by `make lock` with the same pip-compile'; \
	  echo '# as requirements.lock (--only-build-deps --build-deps-for=wheel). Do not edit by hand.'; \
	  cat $(BUILD_LOCK_FILE); \
	} > $(LOCK_TOOLS)/lock.tmp
	mv $(LOCK_TOOLS)/lock.tmp $(BUILD_LOCK_FILE)

# The image, built with buildah (installed from Debian's packages when missing). BASE_IMAGE=auto takes
# the Dockerfile's pinned official base when it is here or can be pulled, else the local base of
# `make image-base`; name any other Python 3.11 base to use it. docs/how-to/image.md says more.
IMAGE ?= localhost/bundle-operator:dev
BASE_IMAGE ?= auto

image: $(STAMP)
	IMAGE=$(IMAGE) BASE_IMAGE=$(BASE_IMAGE) $(BIN)/python scripts/image.py build

# localhost/python-base:bookworm: Python 3.11 from Debian's packages (mmdebstrap), for machines that
# reach no container registry; its root filesystem is cached in ~/.cache/bundle-operator/image/.
image-base: $(STAMP)
	$(BIN)/python scripts/image.py base

TEST_PREREQS += image
