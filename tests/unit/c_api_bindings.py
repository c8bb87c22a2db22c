#!/usr/bin/env python3
"""The C API has one definition, include/torchseal.h: the shim's own
definitions include it (a mismatch does not compile), and this test holds
every Python binding (ctypes restype/argtypes in python/torchseal/) to it,
and the header to what libtorchseal.so exports.

    c_api_bindings.py HEADER PYTHON_DIR SHIM
"""
import ctypes
import os
import re
import subprocess
import sys

C_TO_CTYPES = {"int": "c_int", "long long": "c_longlong", "void": None,
               "const char *": "c_char_p"}


def header_api(path):
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    api = {}
    for ret, name, args in re.findall(r"TORCHSEAL_API\s+([\w\s\*]+?)\s*\b(torchseal_\w+)\((.*?)\);",
                                      text):
        params = [] if args.strip() == "void" else [
            re.sub(r"\s*\b\w+$", "", a.strip()).strip() for a in args.split(",")]
        api[name] = (C_TO_CTYPES[ret.strip()], [C_TO_CTYPES[p] for p in params])
    return api


def ctype(expr):
    expr = expr.strip()
    return None if expr == "None" else expr[len("ctypes."):]


def python_bindings(folder):
    """{(file, name): {"restype": ..., "argtypes": [...]}} as each ctypes
    binding in the package states them (a key left out is ctypes' default)."""
    found = {}
    for fn in sorted(os.listdir(folder)):
        if not fn.endswith(".py"):
            continue
        src = open(os.path.join(folder, fn)).read()
        # _bind(lib, "torchseal_x", restype, [argtypes])
        for name, res, args in re.findall(
                r'_bind\(\w+, "(torchseal_\w+)", (None|ctypes\.\w+), \[(.*?)\]\)', src):
            found[(fn, name)] = {"restype": ctype(res),
                                 "argtypes": [ctype(a) for a in args.split(",") if a.strip()]}
        # lib.torchseal_x.restype = ... / .argtypes = [...]
        for name, key, value in re.findall(
                r"\.(torchseal_\w+)\.(restype|argtypes) = (None|ctypes\.\w+|\[.*?\])", src):
            b = found.setdefault((fn, name), {})
            b[key] = ([ctype(a) for a in value[1:-1].split(",") if a.strip()]
                      if key == "argtypes" else ctype(value))
        # fn = ctypes.CDLL(None).torchseal_x, then fn.restype / fn.argtypes
        for alias, name in re.findall(r"(\w+) = [\w.()]*\.(torchseal_\w+)\s*$", src, re.M):
            b = found.setdefault((fn, name), {})
            for key, value in re.findall(r"\b%s\.(restype|argtypes) = (None|ctypes\.\w+|\[.*?\])"
                                         % re.escape(alias), src):
                b[key] = ([ctype(a) for a in value[1:-1].split(",") if a.strip()]
                          if key == "argtypes" else ctype(value))
    return found


def main():
    header, pydir, shim = sys.argv[1:4]
    api = header_api(header)
    failures = []
    if len(api) < 7:
        failures.append("the header declares only %r" % sorted(api))
    exported = set(subprocess.run(["nm", "-D", "--defined-only", shim], capture_output=True,
                                  text=True).stdout.split())
    for name in api:
        if name not in exported:
            failures.append("%s is declared in torchseal.h but not exported by %s" % (name, shim))
    for name in sorted(n for n in exported if n.startswith("torchseal_")):
        if name not in api:
            failures.append("%s is exported but not declared in torchseal.h" % name)
    bindings = python_bindings(pydir)
    for (fn, name), b in sorted(bindings.items()):
        if name not in api:
            failures.append("%s binds %s, which torchseal.h does not declare" % (fn, name))
            continue
        res, args = api[name]
        # ctypes' defaults: int return, arguments converted as given.
        if b.get("restype", "c_int") != res:
            failures.append("%s: %s returns %s, torchseal.h says %s"
                            % (fn, name, b.get("restype", "c_int (default)"), res))
        if b.get("argtypes") != args:
            failures.append("%s: %s takes %s, torchseal.h says %s"
                            % (fn, name, b.get("argtypes", "(unset)"), args))
    bound = {name for _, name in bindings}
    for name in api:
        if name not in bound:
            failures.append("%s is not bound in python/torchseal" % name)
    for f in failures:
        print("FAIL: " + f)
    print("%d functions in torchseal.h; %d Python bindings checked" % (len(api), len(bindings)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
