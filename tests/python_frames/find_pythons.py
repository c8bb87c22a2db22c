"""Prints "name path" for each interpreter the Python-frame tests run on:
pyenv's 3.9-3.13 (3.9 only for the unsupported-version test) and the system
python3. An absent one is printed without a path; its tests then skip."""
import glob
import os
import subprocess


def pyenv_root():
    root = os.environ.get("PYENV_ROOT")
    if root:
        return root
    try:
        return subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.path.expanduser("~/.pyenv")


root = pyenv_root()
for minor in ["3.9", "3.10", "3.11", "3.12", "3.13"]:
    # Skip free-threaded installs (3.13.0t): a different ABI, tested apart.
    found = sorted(p for p in glob.glob(f"{root}/versions/{minor}.*/bin/python3")
                   if not os.path.basename(os.path.dirname(os.path.dirname(p))).endswith("t"))
    print(f"py{minor} {found[-1] if found else ''}".rstrip())
print("system /usr/bin/python3" if os.path.exists("/usr/bin/python3") else "system")
