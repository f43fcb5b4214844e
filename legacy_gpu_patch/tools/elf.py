"""Read the dynamic section of an ELF shared object: soname, needed libraries, run path.

Why not `readelf`: the wheel check runs wherever the build runs, and parsing the three entries it needs is a few
dozen lines of ``struct``; binutils is then not one more requirement. 64- and 32-bit, either byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 14, 15, 29
_PT_LOAD, _PT_DYNAMIC = 1, 2


class ElfError(ValueError):
    pass


@dataclass(frozen=True)
class DynamicInfo:
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]  # DT_RPATH (old style; searched before LD_LIBRARY_PATH)
    runpath: tuple[str, ...]  # DT_RUNPATH (searched after LD_LIBRARY_PATH)

    @property
    def search_path(self) -> tuple[str, ...]:
        return self.runpath or self.rpath


def read_dynamic(data: bytes) -> DynamicInfo:
    """Parse the dynamic section of the ELF image `data` (the whole file)."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    is64 = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if is64:
        phoff, = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
        ph_fmt, dyn_fmt = order + "IIQQQQQQ", order + "qQ"
    else:
        phoff, = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
        ph_fmt, dyn_fmt = order + "IIIIIIII", order + "iI"
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz): to map DT_STRTAB's address to a file offset
    dynamic: tuple[int, int] | None = None
    for i in range(phnum):
        fields = struct.unpack_from(ph_fmt, data, phoff + i * phentsize)
        if is64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields[:5]
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return DynamicInfo(None, (), (), ())
    entries: list[tuple[int, int]] = []
    size = struct.calcsize(dyn_fmt)
    offset, filesz = dynamic
    for pos in range(offset, offset + filesz, size):
        tag, value = struct.unpack_from(dyn_fmt, data, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    strtab_addr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_addr is None:
        raise ElfError("dynamic section without a string table")
    strtab = next((off + strtab_addr - va for va, off, sz in loads if va <= strtab_addr < va + sz), None)
    if strtab is None:
        raise ElfError("string table outside the loaded segments")

    def text(index: int) -> str:
        end = data.index(b"\0", strtab + index)
        return data[strtab + index:end].decode("utf-8", "replace")

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for t, v in entries if t == tag for p in text(v).split(":") if p)

    soname = next((text(v) for t, v in entries if t == _DT_SONAME), None)
    needed = tuple(text(v) for t, v in entries if t == _DT_NEEDED)
    return DynamicInfo(soname, needed, paths(_DT_RPATH), paths(_DT_RUNPATH))
