"""Loading document text (canonical YAML or JSON) into plain data, remembering where each value stood.

Only JSON-compatible data comes out: strings, integers, finite floats, booleans, null, lists and
string-keyed mappings. Everything YAML can express beyond that (timestamps, binary, custom tags,
duplicate keys, non-string keys, alias bombs, unbounded nesting) is refused with the line.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml

from bundle_operator.document.pointer import split_pointer, to_pointer

MAX_SOURCE_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 64
# Aliases may repeat a subtree; the expanded document must stay within a sane multiple of the
# source, or a few lines of anchors could make us build gigabytes (the "billion laughs").
MAX_EXPANDED_NODES = 2_000_000

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR_TAG = "tag:yaml.org,2002:str"
_PLAIN_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
}
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class SourceError(ValueError):
    """The text is not a usable YAML or JSON document; ``line`` is 1-based when known."""

    def __init__(
        self, message: str, line: int | None = None, path: str | None = None, *, too_large: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.path = path
        self.too_large = too_large


@dataclass(frozen=True)
class ScalarPosition:
    """Where a scalar's text starts and how it was written (YAML style: '|', '>', '"', "'" or '')."""

    line: int
    style: str


class SourceMap:
    """Answers "which line holds this JSON Pointer?" from the composed YAML node tree.

    Lines are looked up only for the places an issue names, so a clean document never pays for
    them; JSON text is even composed lazily, on the first question.
    """

    def __init__(self, root: yaml.Node | None = None, text: str | None = None) -> None:
        self._root = root
        self._text = text  # JSON text still to compose, when asked
        self._index: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}

    def _tree(self) -> yaml.Node | None:
        if self._root is None and self._text is not None:
            text, self._text = self._text, None
            # JSON is (nearly) YAML; where they disagree (tabs, exotic escapes) no lines are known.
            try:
                self._root = yaml.compose(text, Loader=_Loader)
            except (yaml.YAMLError, RecursionError):
                self._root = None
        return self._root

    def _entry(self, node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
        index = self._index.get(id(node))
        if index is None:
            index = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    index.setdefault(key_node.value, (key_node, value_node))
            self._index[id(node)] = index
        return index.get(key)

    def _walk(self, pointer: str) -> tuple[int | None, yaml.Node | None]:
        """The line of the deepest place the pointer reaches, and the node if it reaches the end."""
        node = self._tree()
        if node is None:
            return None, None
        line: int | None = node.start_mark.line + 1
        try:
            tokens = split_pointer(pointer)
        except ValueError:
            return line, None
        for token in tokens:
            if isinstance(node, yaml.MappingNode):
                entry = self._entry(node, token)
                if entry is None:
                    return line, None
                line = entry[0].start_mark.line + 1  # a mapping entry is placed at its key
                node = entry[1]
            elif isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
                node = node.value[int(token)]
                line = node.start_mark.line + 1
            else:
                return line, None
        return line, node

    def line_of(self, pointer: str | None) -> int | None:
        """The line of the pointer, or of the nearest ancestor the document has."""
        if pointer is None:
            return None
        return self._walk(pointer)[0]

    def scalar(self, pointer: str) -> ScalarPosition | None:
        """Where the scalar at the pointer starts and its YAML style, when it is one."""
        node = self._walk(pointer)[1]
        if not isinstance(node, yaml.ScalarNode):
            return None
        return ScalarPosition(node.start_mark.line + 1, node.style or "")


@dataclass(frozen=True)
class LoadedSource:
    """The document as plain data and where its values stood."""

    data: Any
    source_map: SourceMap
    format: str


def load_source(text: str | bytes) -> LoadedSource:
    """Load YAML or JSON text; raises SourceError naming the line for anything unusable."""
    if isinstance(text, bytes):
        if len(text) > MAX_SOURCE_BYTES:
            raise SourceError(_too_large(len(text)), too_large=True)
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SourceError(f"the document is not UTF-8 text (byte {exc.start})") from None
    elif len(text) > MAX_SOURCE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise SourceError(_too_large(len(text.encode("utf-8", "surrogatepass"))), too_large=True)
    if not text.strip():
        raise SourceError("the document is empty", 1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SourceError(f"the document is not valid Unicode text (character {exc.start})") from None
    loaded = _load(text)
    if _SURROGATE_ESCAPE.search(text):
        refuse_lone_surrogates(loaded.data)
    return loaded


# "\ud800" and friends: an escape that can decode to half of a UTF-16 pair.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def refuse_lone_surrogates(data: Any) -> None:
    """Raise SourceError at the first string (key or value) that is not valid Unicode text."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, tokens = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, tokens))
                stack.append((item, (*tokens, key)))
        elif isinstance(value, list):
            stack.extend((item, (*tokens, i)) for i, item in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                pointer = to_pointer(tokens)
                raise SourceError(
                    f"{pointer or '/'}: a text holds half of a UTF-16 surrogate pair (an escape such "
                    "as \\ud800), which is not a character",
                    path=pointer,
                ) from None


def _load(text: str) -> LoadedSource:
    if text.lstrip()[:1] in "{[":
        try:
            return _load_json(text)
        except _NotJson as not_json:
            # Flow-style YAML also starts with a brace; when that reads, it is what was meant.
            try:
                return _load_yaml(text)
            except SourceError:
                raise not_json.error from None
    return _load_yaml(text)


class _NotJson(Exception):
    def __init__(self, error: SourceError) -> None:
        super().__init__(error.message)
        self.error = error


def data_size(data: Any) -> int:
    """The bytes of a document given as data, measured as a source: its compact JSON, which is
    also a YAML source of the same document."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def too_large_message(size: int) -> str:
    """Why a document of ``size`` bytes is refused."""
    return _too_large(size)


def _too_large(size: int) -> str:
    return f"the document is {size} bytes; at most {MAX_SOURCE_BYTES} bytes (5 MiB) are accepted"


def _load_json(text: str) -> LoadedSource:
    def no_constants(name: str) -> Any:
        raise SourceError(f"{name} is not a JSON number")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise SourceError(f"the key '{key}' appears twice in one object")
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=no_constants)
    except SourceError as exc:
        if exc.line is None:
            # The JSON decoder does not say where; the YAML reading of the same text does.
            try:
                _load_yaml(text)
            except SourceError as placed:
                if placed.line is not None and placed.message == exc.message.replace("object", "mapping"):
                    raise SourceError(exc.message, placed.line, placed.path) from None
        raise
    except json.JSONDecodeError as exc:
        raise _NotJson(SourceError(f"invalid JSON: {exc.msg}", exc.lineno)) from None
    except ValueError as exc:  # integers beyond Python's digit limit
        raise SourceError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise SourceError(f"the document is nested more than {MAX_DEPTH} levels deep") from None
    _check_json_depth(data)
    return LoadedSource(data=data, source_map=SourceMap(text=text), format="json")


def _check_json_depth(data: Any) -> None:
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SourceError(f"the document is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _load_yaml(text: str) -> LoadedSource:
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise SourceError(f"invalid YAML: {problem}", line) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise SourceError(f"the document is nested more than {MAX_DEPTH} levels deep") from None
    if len(nodes) > 1:
        line = nodes[1].start_mark.line + 1
        raise SourceError("the text holds more than one YAML document; a bundle is one document", line)
    if not nodes or nodes[0] is None:
        raise SourceError("the document is empty", 1)
    data = _Builder().build(nodes[0], 0)
    return LoadedSource(data=data, source_map=SourceMap(root=nodes[0]), format="yaml")


class _Builder:
    """Turns a composed YAML node tree into JSON-compatible data."""

    def __init__(self) -> None:
        self.constructor = yaml.SafeLoader("")  # only its scalar constructors are used
        self.expanded = 0

    def build(self, node: yaml.Node, depth: int) -> Any:
        self.expanded += 1
        if self.expanded > MAX_EXPANDED_NODES:
            raise SourceError("aliases expand the document beyond what it may hold", _line(node))
        if depth > MAX_DEPTH:
            raise SourceError(f"the document is nested more than {MAX_DEPTH} levels deep", _line(node))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise SourceError(f"the tag {node.tag} is not allowed", _line(node))
            return [self.build(item, depth + 1) for item in node.value]
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP_TAG:
                raise SourceError(f"the tag {node.tag} is not allowed", _line(node))
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                    raise SourceError("mapping keys must be plain strings", _line(key_node))
                key = key_node.value
                if key in out:
                    raise SourceError(f"the key '{key}' appears twice in one mapping", _line(key_node))
                out[key] = self.build(value_node, depth + 1)
            return out
        raise SourceError("unsupported YAML node", _line(node))  # pragma: no cover - no other kinds

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag == _STR_TAG:
            return node.value
        if node.tag == _TIMESTAMP_TAG:
            # A date-looking value stays the text the author wrote; dates are not a JSON type.
            return node.value
        if node.tag not in _PLAIN_TAGS:
            raise SourceError(f"the tag {node.tag} is not allowed", _line(node))
        try:
            value = self.constructor.construct_object(node)
        except (ValueError, yaml.YAMLError):
            raise SourceError("this number cannot be read", _line(node)) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise SourceError("numbers must be finite (no .nan or .inf)", _line(node))
        return value


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1
