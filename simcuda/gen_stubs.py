#!/usr/bin/env python3
"""Generate the ABI surface of one simcuda library at build time.

Inputs: the real library (its dynamic symbol table is the export contract) and
the static archive of what simcuda implements. Outputs:
  * a C file with a not-supported stub for every real export we do not
    implement (each logs its name once),
  * a linker version script exporting exactly real ∪ implemented names,
  * optionally (driver only) the cuGetProcAddress table, derived from the
    PFN_<name>_v<version>[_ptds|_ptsz] typedefs of the toolkit headers.

The stubs are declared `int f(void)`: every unsimulated entry point of these
libraries returns an int-sized error enum in %eax, and the x86-64 SysV caller
cleans up its own arguments, so a wrong parameter list is harmless.
"""
import argparse
import os
import re
import subprocess
import sys

PREFIXES = {
    'cudart': ('cuda', '__cuda'),
    'cuda': ('cu',),
    'cupti': ('cupti', 'Cupti'),
    'cublas': ('cublas',),
    'cublasLt': ('cublasLt',),
    'cudnn': ('cudnn',),
}


def nm_defined(path, dynamic):
    args = ['nm', '--defined-only', '-g']
    if dynamic:
        args.append('-D')
    out = subprocess.run(args + [path], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in ('T', 'W', 'i'):
            continue
        names.add(parts[2].split('@')[0])
    return names


def real_exports(candidates):
    for path in candidates:
        if path and os.path.exists(path):
            return nm_defined(path, True), path
    return set(), None


def variant_name(base, k):
    return base if k == 1 else '%s_v%d' % (base, k)


def header_defaults(path):
    """base -> default variant number per cuda.h: `#define cuX cuX_v2`
    (possibly wrapped in __CUDA_API_PTDS/PTSZ) makes 2, a plain declaration 1.
    Newer variants the header does not select (cuCtxSynchronize_v2 in 13.0)
    are not handed out for the base name."""
    if not path or not os.path.exists(path):
        return {}
    text = open(path, encoding='utf-8', errors='replace').read()
    out = {}
    for m in re.finditer(r'CUresult\s+CUDAAPI\s+(cu\w+)\s*\(', text):
        out.setdefault(m.group(1), 1)
    for m in re.finditer(r'#define\s+(cu\w+)\s+(?:__CUDA_API_PT(?:DS|SZ)\()?(cu\w+?)\)?\s*$',
                         text, re.M):
        base, target = m.group(1), m.group(2)
        v = re.fullmatch(re.escape(base) + r'_v(\d+)', target)
        if v:
            out[base] = int(v.group(1))
    return out


def proc_table(typedef_headers, exports, defaults):
    """Rows (base, version, pt, symbol) for cuGetProcAddress."""
    pat = re.compile(r'\(\s*CUDAAPI\s*\*\s*PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\s*\)')
    default, pt = {}, {}
    for hdr in typedef_headers:
        if not os.path.exists(hdr):
            continue
        with open(hdr, encoding='utf-8', errors='replace') as f:
            for m in pat.finditer(f.read()):
                base, ver, kind = m.group(1), int(m.group(2)), m.group(3)
                if kind:
                    pt.setdefault(base, set()).add(ver)
                else:
                    default.setdefault(base, set()).add(ver)
    rows = []
    covered = set()
    for base, vers in default.items():
        vers = sorted(vers)
        maxk = 1
        for k in range(2, 10):
            if variant_name(base, k) in exports:
                maxk = k
        # Variant k was introduced at the k-th version; when the header lists
        # fewer or more versions than variants, the newest ones line up.
        shift = maxk - len(vers)
        ver_of = {}
        for i, v in enumerate(vers):
            k = i + 1 + shift
            if k >= 1:
                ver_of[k] = v
        if base in defaults:
            ver_of = {k: v for k, v in ver_of.items() if k <= defaults[base]}
        for k, v in ver_of.items():
            name = variant_name(base, k)
            if name in exports:
                rows.append((base, v, 0, name))
                covered.add(name)
        for v in sorted(pt.get(base, ())):
            active = [k for k, kv in ver_of.items() if kv <= v]
            for k in sorted(active, reverse=True):
                for suffix in ('_ptds', '_ptsz'):
                    name = variant_name(base, k) + suffix
                    if name in exports:
                        rows.append((base, v, 1, name))
                        covered.add(name)
                        break
                else:
                    continue
                break
    suffix_re = re.compile(r'(_v\d+)?(_ptds|_ptsz)?$')
    for name in exports:
        if name in covered or not name.startswith('cu'):
            continue
        m = suffix_re.search(name)
        if m and m.group(0):
            continue
        if name not in default:
            rows.append((name, 0, 0, name))
    rows.sort()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lib', required=True, choices=sorted(PREFIXES))
    ap.add_argument('--real', action='append', default=[])
    ap.add_argument('--impl', required=True, action='append')
    ap.add_argument('--node', default='')
    ap.add_argument('--error', required=True, type=int)
    ap.add_argument('--typedefs', action='append', default=[])
    ap.add_argument('--header', default='')
    # Math entry points (a regex on the name): their stubs succeed and do
    # nothing, as simcuda's kernels do, instead of returning --error.
    ap.add_argument('--noop', default='')
    ap.add_argument('--out-c', required=True)
    ap.add_argument('--out-map', required=True)
    args = ap.parse_args()

    real, real_path = real_exports(args.real)
    if real_path is None:
        print('gen_stubs: no real %s library found; exporting only the '
              'simulated set' % args.lib, file=sys.stderr)
    implemented = set()
    for impl in args.impl:
        implemented |= {n for n in nm_defined(impl, False)
                        if n.startswith(PREFIXES[args.lib]) or
                        n.startswith('simcuda')}
    stubs = sorted(real - implemented)
    exports = sorted(real | implemented)

    out = ['/* Generated by gen_stubs.py from %s. Do not edit. */' %
           (real_path or 'the implemented set'),
           '#include <stdatomic.h>', '#include <stdio.h>', '']
    out.append('static atomic_flag simcuda_stub_seen[%d];' % max(1, len(stubs)))
    out.append('static int simcuda_stub_hit(int i, const char *name)')
    out.append('{')
    out.append('    if (!atomic_flag_test_and_set(&simcuda_stub_seen[i]))')
    out.append('        fprintf(stderr, "simcuda: %s not simulated\\n", name);')
    out.append('    return %d;' % args.error)
    out.append('}')
    out.append('')
    noop = re.compile(args.noop) if args.noop else None
    for i, name in enumerate(stubs):
        out.append('__attribute__((visibility("default"))) int %s(void);' % name)
        if noop and noop.search(name):
            out.append('int %s(void) { return 0; }' % name)
        else:
            out.append('int %s(void) { return simcuda_stub_hit(%d, "%s"); }'
                       % (name, i, name))
    if args.typedefs:
        rows = proc_table(args.typedefs, set(exports), header_defaults(args.header))
        out.append('')
        for name in sorted({r[3] for r in rows} - set(stubs)):
            out.append('int %s(void);' % name)
        out.append('struct simcuda_proc_entry { const char *base; int version; '
                   'int per_thread; const char *symbol; int (*fn)(void); };')
        out.append('__attribute__((visibility("hidden"))) extern const '
                   'struct simcuda_proc_entry simcuda_proc_table[];')
        out.append('__attribute__((visibility("hidden"))) extern const '
                   'unsigned simcuda_proc_table_size;')
        out.append('const struct simcuda_proc_entry simcuda_proc_table[] = {')
        for base, ver, ptk, name in rows:
            out.append('    {"%s", %d, %d, "%s", %s},' % (base, ver, ptk, name, name))
        out.append('};')
        out.append('const unsigned simcuda_proc_table_size = %d;' % len(rows))
    with open(args.out_c, 'w') as f:
        f.write('\n'.join(out) + '\n')

    body = ''.join('    %s;\n' % n for n in exports)
    with open(args.out_map, 'w') as f:
        f.write('%s {\n  global:\n%s  local: *;\n};\n' % (args.node, body))


if __name__ == '__main__':
    main()
