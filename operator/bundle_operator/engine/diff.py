"""Differences between two JSON values as JSON Pointer paths: what drift reports."""

from __future__ import annotations

from typing import Any

from bundle_operator.document.pointer import join_pointer


def changed_paths(expected: Any, actual: Any, pointer: str = "") -> list[str]:
    """Paths where ``actual`` differs from ``expected``: down to the differing key, list item or scalar.

    A list whose length changed is reported as a whole; same-length lists item by item.
    """
    if expected == actual:
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        paths: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                paths.append(join_pointer(pointer, key))
            else:
                paths.extend(changed_paths(expected[key], actual[key], join_pointer(pointer, key)))
        return paths
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        paths = []
        for index, (left, right) in enumerate(zip(expected, actual, strict=True)):
            paths.extend(changed_paths(left, right, join_pointer(pointer, index)))
        return paths
    return [pointer]
