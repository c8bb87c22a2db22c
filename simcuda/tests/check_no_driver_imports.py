#!/usr/bin/env python3
"""The runtime must reach the driver only through cuGetProcAddress: fail if
any given library or archive has an undefined cu* symbol."""
import re
import subprocess
import sys

bad = []
for path in sys.argv[1:]:
    args = ['nm', '--undefined-only'] + (['-D'] if '.so' in path else []) + [path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    syms = [l.split()[-1] for l in out.splitlines() if len(l.split()) >= 2]
    bad += ['%s: %s' % (path, s) for s in syms if re.match(r'cu[A-Z]', s)]
if bad:
    print('\n'.join(bad))
    sys.exit(1)
print('no driver symbols imported by', ' '.join(sys.argv[1:]))
