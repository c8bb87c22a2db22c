"""Run by ``sys.remote_exec`` inside the process `torchseal attach PID`
attaches to (CPython 3.14+; docs/attach.md); never imported. The CLI puts
one line before this text, ``_TORCHSEAL_ATTACH = (shim, request, status)``:
the shim's path, the request (key=value lines, bytes) and the status file
the shim reports to.

It loads the shim and hands it the request; torchseal_attach only queues the
late start for the main thread's next safe point, as the ptrace path does.
Everything it defines is removed again: the process keeps no trace of it in
``__main__``.
"""


def _torchseal_remote_attach(shim, request, status):
    import ctypes
    import os

    try:
        lib = ctypes.CDLL(shim, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        lib.torchseal_attach.restype = ctypes.c_int
        lib.torchseal_attach.argtypes = [ctypes.c_char_p]
        rc = lib.torchseal_attach(request)
        why = "the shim refused the request"
    except Exception as e:  # noqa: BLE001 - said in the status file, never raised here
        rc, why = -1, "cannot load the shim: " + str(e).replace("\n", " ")
    if rc != 0:
        with open(status, "a") as f:
            f.write("error " + why + "\n")


_torchseal_remote_attach(*_TORCHSEAL_ATTACH)  # noqa: F821 - the CLI's first line
del _torchseal_remote_attach, _TORCHSEAL_ATTACH
