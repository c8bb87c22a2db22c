"""Reads, from outside, the GOT entries through which a process's loaded
objects call CUDA: the slots `torchseal attach` rewrites and must put back.
The same selection as the shim's (shim/intercept/got_patch.cpp): JUMP_SLOT
and GLOB_DAT relocations against undefined cuda*, cu[A-Z]* and
cuptiSubscribe* symbols, in every mapped object but libc, the dynamic
linker and libtorchseal. x86_64 ELF only.
"""
import mmap
import struct

R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT = 6, 7
SHT_RELA, SHT_DYNSYM = 4, 11
PT_LOAD = 1
ET_EXEC = 2


def cuda_name(n):
    if n.startswith("cuptiSubscribe") or n.startswith("cuda"):
        return True
    return n.startswith("cu") and len(n) > 2 and "A" <= n[2] <= "Z"


def skipped(path):
    base = path.rsplit("/", 1)[-1]
    return base.startswith(("ld-linux", "libc.so", "libtorchseal", "linux-vdso"))


def cuda_relocs(path):
    """[(link-time slot offset, symbol)], the first PT_LOAD's page, is ET_EXEC."""
    with open(path, "rb") as f:
        try:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        except (ValueError, OSError):
            return [], 0, False
    try:
        if m[:4] != b"\x7fELF" or m[4] != 2:
            return [], 0, False
        e_type = struct.unpack_from("<H", m, 16)[0]
        e_phoff, e_shoff = struct.unpack_from("<QQ", m, 32)
        e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", m, 54)
        first_load = min((struct.unpack_from("<Q", m, e_phoff + i * e_phentsize + 16)[0]
                          for i in range(e_phnum)
                          if struct.unpack_from("<I", m, e_phoff + i * e_phentsize)[0] == PT_LOAD),
                         default=0) & ~0xFFF
        sections = [struct.unpack_from("<IIQQQQIIQQ", m, e_shoff + i * e_shentsize)
                    for i in range(e_shnum)]
        dynsym = next((i for i, s in enumerate(sections) if s[1] == SHT_DYNSYM), None)
        if dynsym is None:
            return [], first_load, e_type == ET_EXEC
        sym_off, strtab = sections[dynsym][4], sections[sections[dynsym][6]][4]
        out = []
        for s in sections:
            if s[1] != SHT_RELA or s[6] != dynsym:
                continue
            off, size = s[4], s[5]
            for k in range(size // 24):
                r_offset, r_info = struct.unpack_from("<QQ", m, off + 24 * k)
                if r_info & 0xFFFFFFFF not in (R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT):
                    continue
                st_name, _, _, st_shndx = struct.unpack_from("<IBBH", m, sym_off + 24 * (r_info >> 32))
                if st_shndx != 0:
                    continue
                end = m.find(b"\0", strtab + st_name)
                name = m[strtab + st_name:end].decode("ascii", "replace")
                if cuda_name(name):
                    out.append((r_offset, name))
        return out, first_load, e_type == ET_EXEC
    finally:
        m.close()


def slots(pid):
    """[(object path, symbol, slot address)] of the process now."""
    bases = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or int(parts[2], 16) != 0:
                continue
            path = parts[5].strip()
            # A file replaced on disk since it was mapped (a rebuild) cannot
            # be read for its relocations any more.
            if path.endswith(" (deleted)"):
                continue
            if path.startswith("/") and not skipped(path):
                bases.setdefault(path, int(parts[0].split("-")[0], 16))
    out = []
    for path, start in bases.items():
        relocs, first_load, is_exec = cuda_relocs(f"/proc/{pid}/root{path}")
        bias = 0 if is_exec else start - first_load
        out.extend((path, name, bias + off) for off, name in relocs)
    return out


def read(pid, where):
    """{slot address: the pointer stored there} for `where` (from slots())."""
    values = {}
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for _, _, addr in where:
            mem.seek(addr)
            values[addr] = struct.unpack("<Q", mem.read(8))[0]
    return values
