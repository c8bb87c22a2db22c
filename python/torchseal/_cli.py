"""The `torchseal` command of the pip-installed package.

pip installs console scripts as Python launchers, so this one replaces
itself with the CLI binary shipped in the package (torchseal/bin/torchseal).
The binary finds its shim at torchseal/lib/libtorchseal.so from its own path
(/proc/self/exe), so `torchseal run` needs no path set; exec keeps the
process id, the output and the exit status those of the CLI.
"""

import errno
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "torchseal")
    try:
        os.execv(binary, ["torchseal"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"torchseal: cannot run {binary}: {e.strerror}\n")
        return 127 if e.errno == errno.ENOENT else 126
