"""Prints "name path" for each interpreter the Python-frame tests run on:
pyenv's 3.9-3.13 (3.9 only for the unsupported-version test), the system
python3, the 3.14/3.15 that scripts/python-interpreters provisioned, and the
free-threaded builds it found (names ending in "t"; the minors with none are
one "free-threaded" line). An absent one is printed without a path; its tests
then skip.

  find_pythons.py            the list above (meson reads it at configure time)
  find_pythons.py --summary  which were tested and which skipped, and why

It only reads what is already on the machine: provisioning (network) is
scripts/python-interpreters' job, run by scripts/test before the build."""
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pyenv_root():
    root = os.environ.get("PYENV_ROOT")
    if root:
        return root
    try:
        return subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.path.expanduser("~/.pyenv")


def found():
    """[(name, path or "", why skipped or "")]"""
    out = []
    root = pyenv_root()
    for minor in ["3.9", "3.10", "3.11", "3.12", "3.13"]:
        # Free-threaded installs (3.13.0t) come from python-interpreters below.
        paths = sorted(p for p in glob.glob(f"{root}/versions/{minor}.*/bin/python3")
                       if not os.path.basename(os.path.dirname(os.path.dirname(p))).endswith("t"))
        out.append((f"py{minor}", paths[-1] if paths else "",
                    "" if paths else f"no pyenv {minor} under {root}"))
    system = "/usr/bin/python3"
    out.append(("system", system if os.path.exists(system) else "",
                "" if os.path.exists(system) else f"no {system}"))
    script = os.path.join(ROOT, "scripts", "python-interpreters")
    try:
        r = subprocess.run(["bash", script, "--cached"], capture_output=True, text=True,
                           timeout=60)
        lines = r.stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as e:
        lines = [f"py3.14 skipped: {script} failed: {e}", f"py3.15 skipped: {script} failed: {e}"]
    for line in lines:
        name, _, rest = line.partition(" ")
        if rest.startswith("skipped: "):
            out.append((name, "", rest[len("skipped: "):]))
        elif rest:
            out.append((name, rest, ""))
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--summary"]:
        for name, path, why in found():
            print(f"python frames: tested {name} ({path})" if path
                  else f"python frames: skipped {name}: {why}")
    else:
        for name, path, _ in found():
            print(f"{name} {path}".rstrip())
