"""Drift checks of one workspace fall in the same slot, so they can share one list per kind."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bundle_operator.k8s.installation.drift_clock import drift_slot


@given(now=st.floats(min_value=0, max_value=1e7), interval=st.floats(min_value=5, max_value=86400))
def test_the_slot_is_the_last_boundary_before_now(now: float, interval: float) -> None:
    slot = drift_slot(now, interval, "http://p", "acme")
    assert slot <= now < slot + interval + 1e-6
    # Every moment of the same interval is in the same slot; the next interval starts a new one.
    assert drift_slot(slot + interval * 0.999, interval, "http://p", "acme") == slot
    assert drift_slot(slot + interval * 1.001, interval, "http://p", "acme") > slot


def test_workspaces_start_their_intervals_at_different_moments() -> None:
    starts = {drift_slot(1000.0, 300.0, "http://p", f"ws-{i}") % 300.0 for i in range(20)}
    assert len(starts) == 20
    # The same workspace on the same platform (however its URL is spelled) shares its boundary.
    assert drift_slot(1000.0, 300.0, "http://P/", "acme") == drift_slot(1000.0, 300.0, "http://p", "acme")
