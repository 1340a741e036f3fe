"""Entry rules: only regular files and folders, safe relative names, no duplicates, nothing encrypted.

The official packer writes Unix permission bits with no file-type bits at all, so an entry whose
type bits are zero is a regular file (or a folder when its name ends with ``/``).
"""

from __future__ import annotations

import bisect
import stat
import unicodedata
from dataclasses import dataclass

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import Limits
from bundle_operator.mcpb.zipindex import RawEntry

UNIX = 3
STORED = 0
DEFLATED = 8
FLAG_ENCRYPTED = 0x0001
FLAG_STRONG_ENCRYPTION = 0x0040
FLAG_UTF8 = 0x0800
METHOD_AES = 99
DOS_DIRECTORY = 0x10
WINDOWS_REPARSE_POINT = 0x400  # how Windows archivers mark a link


@dataclass(frozen=True)
class Entry:
    """A checked archive entry; ``name`` is a clean relative POSIX path without a trailing slash."""

    name: str
    is_dir: bool
    executable: bool
    method: int
    crc: int
    compressed_size: int
    uncompressed_size: int
    local_offset: int
    raw_name: bytes
    flags: int


def _decode_name(raw: RawEntry) -> str:
    try:
        if raw.flags & FLAG_UTF8:
            return raw.raw_name.decode("utf-8")
        # Without the flag the zip spec says CP437, but real packers write UTF-8 regardless.
        try:
            return raw.raw_name.decode("utf-8")
        except UnicodeDecodeError:
            return raw.raw_name.decode("cp437")
    except UnicodeDecodeError:
        raise Refused("entry_path", f"entry {raw.index} has a name that is not valid UTF-8") from None


def check_relative_path(name: str, what: str, limits: Limits) -> str:
    """Refuse absolute, escaping, backslash or odd paths; return the path without ``./`` or a final ``/``."""
    shown = name.encode("unicode_escape").decode("ascii")
    if not name or name in ("/", "./"):
        raise Refused("entry_path", f"{what} has an empty name")
    if "\\" in name:
        raise Refused("entry_path", f"{what} '{shown}' contains a backslash")
    if name.startswith("/") or (len(name) >= 2 and name[1] == ":"):
        raise Refused("entry_path", f"{what} '{shown}' is an absolute path")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise Refused("entry_path", f"{what} '{shown}' contains a control character")
    trimmed = name[:-1] if name.endswith("/") else name
    parts = trimmed.split("/")
    while parts and parts[0] == ".":
        parts = parts[1:]
    if not parts:
        raise Refused("entry_path", f"{what} '{shown}' names no file")
    if len(parts) > limits.max_path_depth:
        raise Refused("entry_path_depth", f"{what} is more than {limits.max_path_depth} folders deep")
    for part in parts:
        if part == "..":
            raise Refused("entry_path", f"{what} '{shown}' escapes the archive with '..'")
        if part in ("", "."):
            raise Refused("entry_path", f"{what} '{shown}' has an empty or '.' path component")
        if len(part.encode("utf-8")) > limits.max_name_component_bytes:
            raise Refused("entry_path", f"{what} '{shown}' has a path component that is too long")
    return "/".join(parts)


def _kind(raw: RawEntry, name: str) -> tuple[bool, bool]:
    """(is_dir, executable) from the external attributes, refusing links and special files."""
    named_dir = name.endswith("/")
    if raw.create_system == UNIX:
        mode = raw.external_attr >> 16
        file_type = stat.S_IFMT(mode)
        if file_type == stat.S_IFLNK:
            raise Refused("entry_link", f"entry '{name}' is a symbolic link")
        if file_type == stat.S_IFDIR:
            is_dir = True
        elif file_type in (0, stat.S_IFREG):
            is_dir = named_dir
        else:
            raise Refused("entry_type", f"entry '{name}' is a device, pipe or socket, not a file")
        executable = bool(mode & stat.S_IXUSR)
    else:
        # Whatever the creator system says, unzip and friends apply Unix mode bits found in the
        # upper half and would create a link: refuse one wherever it is declared.
        if stat.S_IFMT(raw.external_attr >> 16) == stat.S_IFLNK:
            raise Refused("entry_link", f"entry '{name}' is a symbolic link")
        if raw.external_attr & WINDOWS_REPARSE_POINT:
            raise Refused("entry_link", f"entry '{name}' is a link (reparse point)")
        is_dir = bool(raw.external_attr & DOS_DIRECTORY) or named_dir
        executable = False
    if is_dir != named_dir:
        raise Refused("entry_type", f"entry '{name}' is marked as a folder but named as a file, or back")
    if is_dir and raw.uncompressed_size != 0:
        raise Refused("entry_type", f"folder entry '{name}' carries data")
    return is_dir, executable


def check_entries(raws: list[RawEntry], limits: Limits) -> list[Entry]:
    """Apply every entry rule and the declared-size limits; return the entries in archive order."""
    if len(raws) > limits.max_files:
        raise Refused("too_many_files", f"the archive has {len(raws)} entries; at most {limits.max_files}")
    entries: list[Entry] = []
    seen: dict[str, str] = {}  # folded name -> name as written
    declared = 0
    for raw in raws:
        name = _decode_name(raw)
        if raw.flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION) or raw.method == METHOD_AES:
            raise Refused("entry_encrypted", f"entry '{name}' is encrypted")
        if raw.method not in (STORED, DEFLATED):
            raise Refused("entry_compression", f"entry '{name}' uses compression method {raw.method}")
        is_dir, executable = _kind(raw, name)
        clean = check_relative_path(name, f"entry '{name}'", limits)
        if len(clean.encode("utf-8")) > limits.max_path_bytes:
            raise Refused("entry_path", f"entry '{name}' has a path that is too long")
        # Names that one file system treats as the same file collide, whatever their case or form.
        folded = unicodedata.normalize("NFC", clean).casefold()
        if folded in seen:
            if seen[folded] == clean:
                raise Refused("entry_duplicate", f"entry '{clean}' appears more than once")
            raise Refused(
                "entry_case_collision", f"entries '{seen[folded]}' and '{clean}' differ only in case"
            )
        seen[folded] = clean
        declared += raw.uncompressed_size
        if declared > limits.max_unpacked_bytes:
            raise Refused(
                "unpacked_too_large",
                f"the archive declares more than {limits.max_unpacked_bytes} bytes unpacked",
            )
        entries.append(
            Entry(
                name=clean,
                is_dir=is_dir,
                executable=executable,
                method=raw.method,
                crc=raw.crc,
                compressed_size=raw.compressed_size,
                uncompressed_size=raw.uncompressed_size,
                local_offset=raw.local_offset,
                raw_name=raw.raw_name,
                flags=raw.flags,
            )
        )
    _check_parents(entries)
    return entries


def _check_parents(entries: list[Entry]) -> None:
    # A file may not also be a folder: 'a' as a file and 'a/b' inside it would fight on disk.
    # Sorted, every name under 'a/' sits at or after the insertion point of 'a/' and the first one
    # there starts with it if any does: a binary search per file instead of a scan per prefix.
    folded = sorted(unicodedata.normalize("NFC", e.name).casefold() for e in entries)
    shown = {unicodedata.normalize("NFC", e.name).casefold(): e.name for e in entries}
    for e in entries:
        if e.is_dir:
            continue
        name = unicodedata.normalize("NFC", e.name).casefold()
        inside = name + "/"
        at = bisect.bisect_left(folded, inside)
        if at < len(folded) and folded[at].startswith(inside):
            raise Refused(
                "entry_duplicate", f"entry '{shown[folded[at]]}' sits inside '{e.name}', which is a file"
            )
