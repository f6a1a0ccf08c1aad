#!/usr/bin/env python3
# Compare the kernels of two cubins without cuobjdump: per kernel the .text bytes (identical bytes = identical SASS),
# .nv.shared / .nv.constant0, and the registers / frame / stack attributes of .nv.info; names with the anonymous
# namespace's hash dropped (it follows the source path). Usage: cubin_cmp.py before.cubin after.cubin
# (a cubin: nvcc <the object's flags> -cubin -o x.cubin src.cu).
import re
import struct
import sys


def norm(n):
    return re.sub(r'_GLOBAL__N__[0-9a-f]+_', '_GN_', n)


def load(fn):
    d = open(fn, 'rb').read()
    assert d[:4] == b'\x7fELF' and d[4] == 2, fn + ': not a 64-bit ELF cubin'
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    hdr = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    stro = hdr[shstrndx][4]
    secs = {}
    for h in hdr:
        name = d[stro + h[0]:d.index(b'\0', stro + h[0])].decode()
        secs[name] = d[h[4]:h[4] + h[5]] if h[1] != 8 else b''
    strtab, sd = secs['.strtab'], secs['.symtab']
    syms = [strtab[o:strtab.index(b'\0', o)].decode() for o in
            (struct.unpack_from('<I', sd, i * 24)[0] for i in range(len(sd) // 24))]
    attrs, info, i = {}, secs.get('.nv.info', b''), 0
    while i < len(info):  # EIATTR records: format, attribute, payload
        fmt, attr = info[i], info[i + 1]
        i += 2
        if fmt == 4:
            size, = struct.unpack_from('<H', info, i)
            if attr in (0x2f, 0x11, 0x12, 0x23) and size >= 8:  # regcount, frame, min stack, max stack
                s, v = struct.unpack_from('<II', info, i + 2)
                attrs.setdefault(norm(syms[s]), {})[{0x2f: 'regs', 0x11: 'frame', 0x12: 'minstack', 0x23: 'maxstack'}[attr]] = v
            i += 2 + size
        elif fmt == 3:
            i += 2
        elif fmt == 2:
            i += 1
    return {norm(k): v for k, v in secs.items()}, attrs


a, aa = load(sys.argv[1])
b, ba = load(sys.argv[2])
bad = 0
for pre in ('.text.', '.nv.shared.', '.nv.constant0.'):
    ka = [k for k in a if k.startswith(pre)]
    diff = [k for k in ka if k not in b or a[k] != b[k]]
    bad += len(diff)
    print(f'{pre}*: {len(ka)} before, {len(ka) - len(diff)} identical', *(['; differ:'] + diff if diff else []))
adiff = [k for k in aa if aa[k] != ba.get(k)]
bad += len(adiff)
print(f'regs / frame / stack: {len(aa)} kernels before, {len(aa) - len(adiff)} identical', *adiff)
for k in b:
    if k.startswith('.text.') and k not in a:
        print('new:', k[6:], ba.get(k[6:], {}))
sys.exit(1 if bad else 0)
