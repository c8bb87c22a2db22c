#!/usr/bin/env python3
"""Writes a C++ header holding a Python source file as one string constant,
so libtorchseal.so can run it without finding it on sys.path.

    embed_source.py SOURCE.py OUTPUT.h NAME
"""
import os
import sys


def main():
    src, out, name = sys.argv[1:4]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    if ')PYSRC"' in text:
        sys.exit(f"{src}: contains the raw-string delimiter )PYSRC\"")
    with open(out, "w", encoding="utf-8") as f:
        f.write(f"// Generated from {os.path.basename(src)} by embed_source.py; do not edit.\n"
                "#pragma once\n\nnamespace torchseal::py {\n\n"
                f'inline constexpr char {name}[] = R"PYSRC({text})PYSRC";\n\n'
                "}  // namespace torchseal::py\n")


if __name__ == "__main__":
    main()
