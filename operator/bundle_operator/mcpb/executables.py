"""Which OS and architecture a program was built for, from the first bytes of its file.

A binary bundle's program runs only where it was built for; the manifest names OSes but not
architectures, so the file's own header decides: ELF (linux), Mach-O (darwin) and PE (win32).
Architectures are named as Go and container platforms name them (amd64, arm64).
"""

from __future__ import annotations

import struct

HEAD_BYTES = 1024  # enough for every header read here (a PE header sits where the DOS stub says)

_ELF_MACHINES = {
    0x03: "386",
    0x28: "arm",
    0x3E: "amd64",
    0xB7: "arm64",
    0xF3: "riscv64",
    0x15: "ppc64",
    0x16: "s390x",
}
_MACHO_CPUS = {7: "386", 0x01000007: "amd64", 12: "arm", 0x0100000C: "arm64"}
_PE_MACHINES = {0x14C: "386", 0x8664: "amd64", 0x1C0: "arm", 0xAA64: "arm64"}


def executable_platform(head: bytes) -> str | None:
    """``<os>/<arch>`` for an ELF, Mach-O or PE program's first bytes; None for anything else."""
    if head[:4] == b"\x7fELF" and len(head) >= 20:
        order = "<" if head[5] == 1 else ">"
        (machine,) = struct.unpack_from(order + "H", head, 18)
        if machine == 0x15 and order == "<":
            return "linux/ppc64le"
        return f"linux/{_ELF_MACHINES.get(machine, f'elf-{machine:#x}')}"
    if len(head) >= 8 and head[:4] in (
        b"\xcf\xfa\xed\xfe",
        b"\xce\xfa\xed\xfe",
        b"\xfe\xed\xfa\xcf",
        b"\xfe\xed\xfa\xce",
    ):
        order = "<" if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe") else ">"
        (cpu,) = struct.unpack_from(order + "I", head, 4)
        return f"darwin/{_MACHO_CPUS.get(cpu, f'macho-{cpu:#x}')}"
    if head[:4] in (b"\xca\xfe\xba\xbe",):
        return "darwin/universal"
    if head[:2] == b"MZ" and len(head) >= 0x40:
        (offset,) = struct.unpack_from("<I", head, 0x3C)
        if offset + 6 <= len(head) and head[offset : offset + 4] == b"PE\0\0":
            (machine,) = struct.unpack_from("<H", head, offset + 4)
            return f"win32/{_PE_MACHINES.get(machine, f'pe-{machine:#x}')}"
    return None
