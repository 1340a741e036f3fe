"""What may be shown of a registry record: URL passwords masked, in time linear in the text."""

from __future__ import annotations

import time

import pytest

from bundle_operator.registry.records import masked, masked_tree


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:secret@example.com/x.mcpb", "https://user:***@example.com/x.mcpb"),
        ("https://ghp_token@github.com/a/b", "https://***@github.com/a/b"),
        ("git+ssh://git:pw@host:22/r", "git+ssh://git:***@host:22/r"),
        ("https://a:b@c:d@host/", "https://a:***@host/"),  # the userinfo ends at the last '@'
        ("see https://u:p@one/ and https://v:q@two?x", "see https://u:***@one/ and https://v:***@two?x"),
        ("https://host:8080/path@x", "https://host:8080/path@x"),  # an '@' past the authority
        ("https://host/?next=a@b", "https://host/?next=a@b"),
        ("user:pass@host", "user:pass@host"),  # not a URL: no '://'
        ("plain text", "plain text"),
    ],
)
def test_masked_hides_the_userinfo_of_every_url(text: str, shown: str) -> None:
    assert masked(text) == shown


def test_masked_tree_masks_strings_at_any_depth_and_keeps_the_rest() -> None:
    record = {"a": [{"url": "https://u:p@h/"}, 1, None, True], "https://k:v@h/": "x"}
    assert masked_tree(record) == {"a": [{"url": "https://u:***@h/"}, 1, None, True], "https://k:***@h/": "x"}


@pytest.mark.parametrize("unit", ["://a:", "://" + "@", "a" * 7 + "://"])
def test_masking_a_hostile_text_is_linear(unit: str) -> None:
    small, large = unit * 100_000, unit * 800_000
    started = time.perf_counter()
    masked(small)
    first = time.perf_counter() - started
    started = time.perf_counter()
    masked(large)
    assert time.perf_counter() - started < 20 * first + 0.5  # eight times the text: not 64 times the time
