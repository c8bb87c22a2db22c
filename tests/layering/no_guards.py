"""libtorchseal.so calls __cxa_guard_acquire nowhere of its own.

A function-local static with a dynamic initialiser is guarded, and a forked
child inherits the guard as the fork found it: if another thread of the
parent was inside the initialiser, the child's first use waits forever (CI:
a fork_hammer child stuck in an atfork handler). The shim uses
common/util/fork_safe.h instead; this check finds any guard that comes back.

    no_guards.py LIBTORCHSEAL_SO
"""

import re
import subprocess
import sys

# libstdc++'s own templates, instantiated by std::regex (the step pattern,
# the hints): a guard around translating '\0' once, held for nanoseconds,
# which we cannot change short of dropping std::regex.
ALLOWED = re.compile(r"std::__detail::_AnyMatcher<")


def main():
    lib = sys.argv[1]
    try:
        out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", lib],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True,
                             universal_newlines=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print("FAIL: cannot disassemble %s: %s" % (lib, e))
        return 1
    func = None
    found, allowed = set(), set()
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            func = m.group(1)
        elif "call" in line and "<__cxa_guard_acquire" in line:
            (allowed if ALLOWED.search(func or "") else found).add(func)
    for f in sorted(allowed):
        print("allowed (libstdc++'s regex): %s" % f[:160])
    # The library imports __cxa_guard_acquire (std::regex does): a check that
    # recognised no call to it at all looked in the wrong way (another
    # architecture's call instruction, -fno-plt), and proves nothing.
    nm = subprocess.run(["nm", "-D", "--undefined-only", lib], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True)
    if "__cxa_guard_acquire" in nm.stdout and not (found or allowed):
        print("FAIL: %s imports __cxa_guard_acquire, but no call to it was recognised in its "
              "disassembly: this check cannot see its call sites here" % lib)
        return 1
    if found:
        print("FAIL: %d function(s) in %s initialise a guarded static; use Lazy or Resolved "
              "(common/util/fork_safe.h):" % (len(found), lib))
        for f in sorted(found):
            print("  " + f[:200])
        return 1
    print("PASS: no guarded statics of ours in %s" % lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
