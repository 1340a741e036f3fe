"""kubeconform as `make kubeconform` builds it (mk/kubeconform.mk), for the tests and the docs pages."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bundle_operator.devcluster.gobuild import cache_dir

REPO = Path(__file__).resolve().parents[1]


def kubeconform_binary() -> Path:
    """The binary mk/kubeconform.mk builds, for the version it names."""
    make = (REPO / "mk" / "kubeconform.mk").read_text()
    match = re.search(r"^KUBECONFORM_VERSION \?= (\S+)$", make, re.MULTILINE)
    assert match is not None, "mk/kubeconform.mk names no KUBECONFORM_VERSION"
    exe = (
        cache_dir("kubeconform", "BUNDLE_OPERATOR_KUBECONFORM_CACHE")
        / f"kubeconform-{match[1]}"
        / "kubeconform"
    )
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} is not built: run make kubeconform")
    return exe
