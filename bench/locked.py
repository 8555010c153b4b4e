#!/usr/bin/env python3
"""Locked instructions a program executed, from a callgrind file written
with --dump-instr=yes: every instruction with a lock prefix, or an xchg
with memory (locked without one), in any of its objects, times how often
it ran. Each is a full barrier that waits for the store buffer to drain
(~20 cycles on x86 even with the line in L1), which instruction counts do
not show. Prints the total, then the functions with the most.

    bench/locked.py [--total] FILE.cg     (--total: only the total)
"""
import re
import subprocess
import sys

POS = re.compile(r'^(0x[0-9a-f]+|[+-]\d+|\*)$')


def locked_in(path):
    """{address: function} of the locked instructions in an object."""
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', path],
                         capture_output=True, text=True).stdout
    found, fn = {}, '?'
    for line in out.splitlines():
        m = re.match(r'^([0-9a-f]+) <(.+)>:$', line)
        if m:
            fn = m.group(2)
            continue
        m = re.match(r'^\s+([0-9a-f]+):\s+(\S+)(.*)$', line)
        if m and (m.group(2) == 'lock' or (m.group(2).startswith('xchg') and '(' in m.group(3))):
            found[int(m.group(1), 16)] = fn
    return found


def count(path):
    objs, names, per = {}, {}, {}
    locked, addr, skip = {}, 0, False
    for line in open(path):
        if line.startswith(('ob=', 'cob=')):
            m = re.match(r'c?ob=\((\d+)\)(?: (.*))?', line.strip())
            if m and m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith('ob=') and m:
                name = names.get(m.group(1), '')
                if name not in objs:
                    objs[name] = locked_in(name) if name.startswith('/') else {}
                locked = objs[name]
            continue
        if line.startswith('calls='):
            skip = True  # the next line is the call's inclusive cost
            continue
        t = line.split()
        if len(t) < 3 or not POS.match(t[0]):
            continue
        if t[0].startswith('0x'):
            addr = int(t[0], 16)
        elif t[0][0] in '+-':
            addr += int(t[0])
        if skip:
            skip = False
            continue
        if addr in locked:
            per[locked[addr]] = per.get(locked[addr], 0) + int(t[2])
    return per


if __name__ == '__main__':
    total_only = sys.argv[1] == '--total'
    per = count(sys.argv[-1])
    print(sum(per.values()))
    if not total_only:
        for fn, n in sorted(per.items(), key=lambda x: -x[1])[:12]:
            print(f'  {n} {fn}')
