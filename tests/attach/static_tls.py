#!/usr/bin/env python3
"""The shim's static TLS block fits what glibc keeps for dlopen.

`torchseal attach` dlopens libtorchseal.so into a running process. Built with
initial-exec TLS (the hot path reads its thread state without a call), the
shim then needs its whole TLS block from glibc's static TLS surplus, which is
fixed when the process starts and shared with every library dlopened before:
after `import torch` some 1.5 KiB are left, and glibc promises dlopened
libraries only its `rtld.optional_static_tls` (512 bytes by default). Past
that, attach fails ("cannot allocate memory in static TLS block") in processes
that loaded a little more. Per-thread buffers belong on the heap.

  static_tls.py LIBTORCHSEAL
"""
import struct
import sys

BUDGET = 512  # glibc.rtld.optional_static_tls's default
PT_TLS = 7


def tls_memsz(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise SystemExit("static_tls: %s is not a 64-bit ELF file" % path)
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from("<I", data, phoff + i * phentsize)
        if p_type == PT_TLS:
            return struct.unpack_from("<Q", data, phoff + i * phentsize + 0x28)[0]
    return 0


def main():
    size = tls_memsz(sys.argv[1])
    print("static TLS of %s: %d bytes (budget %d)" % (sys.argv[1], size, BUDGET))
    if size > BUDGET:
        print("FAIL: the shim's static TLS block is %d bytes, over the %d glibc keeps for "
              "dlopened libraries; move per-thread buffers to the heap" % (size, BUDGET),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
