#!/usr/bin/env python3
"""A strict reader of the Prometheus text exposition format 0.0.4.

Usage: prom_parse.py FILE [NAME=VALUE...]
Exits 1 with "line N: reason" on the first fault: a line outside the
grammar, a family's samples apart from each other or before its HELP and
TYPE, a sample name foreign to its family's type, a repeated series,
histogram buckets not increasing in le and count, no +Inf bucket, or a
+Inf bucket unequal to _count. Each NAME=VALUE argument (a series as
written, e.g. 'x_total{a="b"}=3') must be on the page with that value;
NAME>=VALUE asks for at least that value. With no fault: prints the series
count.
"""
import math
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*'
LVALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
NUMBER = r'(?:[+-]?(?:Inf|NaN)|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)'
HELP = re.compile(r'^# HELP (' + NAME + r') ((?:[^\\\n]|\\[\\n])*)$')
TYPE = re.compile(r'^# TYPE (' + NAME + r') (counter|gauge|histogram|summary|untyped)$')
SAMPLE = re.compile(r'^(' + NAME + r')(\{(?:' + LABEL + '=' + LVALUE + r'(?:,' + LABEL + '='
                    + LVALUE + r')*,?)?\})? (' + NUMBER + r')(?: (-?\d+))?$')
PAIR = re.compile('(' + LABEL + ')=(' + LVALUE + ')')
SUFFIXES = {'counter': [''], 'gauge': [''], 'untyped': [''],
            'histogram': ['_bucket', '_sum', '_count'], 'summary': ['', '_sum', '_count']}


class Fault(Exception):
    pass


def family_of(name, families):
    for fam, typ in families.items():
        for suf in SUFFIXES[typ['type']]:
            if name == fam + suf:
                return fam, suf
    return None, None


def check_histograms(hist):
    for (fam, key), h in hist.items():
        buckets = sorted(h['buckets'], key=lambda b: b[0])
        if not buckets or not math.isinf(buckets[-1][0]):
            raise Fault('%s%s: no +Inf bucket' % (fam, key))
        last = -1
        for le, v in buckets:
            if v < last:
                raise Fault('%s%s: bucket le=%s below the one before' % (fam, key, le))
            last = v
        if h.get('count') != buckets[-1][1]:
            raise Fault('%s%s: +Inf bucket %s != _count %s' % (fam, key, buckets[-1][1],
                                                               h.get('count')))
        if 'sum' not in h:
            raise Fault('%s%s: no _sum' % (fam, key))


def parse_sample(m, families, current, series, hist, n):
    name, labels, value = m.group(1), m.group(2) or '', m.group(3)
    fam, suf = family_of(name, families)
    if fam is None or fam != current:
        raise Fault('line %d: sample %s outside its family (HELP/TYPE first, together)'
                    % (n, name))
    pairs = PAIR.findall(labels)
    names = [p[0] for p in pairs]
    if len(set(names)) != len(names):
        raise Fault('line %d: a label twice' % n)
    if name + labels in series:
        raise Fault('line %d: series %s twice' % (n, name + labels))
    v = float(value.replace('Inf', 'inf'))
    series[name + labels] = v
    if families[fam]['type'] != 'histogram':
        return
    rest = tuple(p for p in pairs if p[0] != 'le')
    h = hist.setdefault((fam, str(rest)), {'buckets': []})
    if suf == '_bucket':
        le = [p[1] for p in pairs if p[0] == 'le']
        if len(le) != 1:
            raise Fault('line %d: a bucket without le' % n)
        h['buckets'].append((float(le[0].strip('"').replace('Inf', 'inf')), v))
    else:
        h[suf[1:]] = v


def parse(text):
    if text and not text.endswith('\n'):
        raise Fault('the page does not end with a newline')
    families, series, hist = {}, {}, {}
    current, seen_help, done = None, set(), set()
    for n, line in enumerate(text.split('\n')[:-1], 1):
        m = HELP.match(line)
        if m:
            if m.group(1) in seen_help:
                raise Fault('line %d: a second HELP for %s' % (n, m.group(1)))
            seen_help.add(m.group(1))
            continue
        m = TYPE.match(line)
        if m:
            fam = m.group(1)
            if fam in families:
                raise Fault('line %d: a second TYPE for %s' % (n, fam))
            if fam not in seen_help:
                raise Fault('line %d: TYPE for %s before its HELP' % (n, fam))
            if current:
                done.add(current)
            families[fam] = {'type': m.group(2)}
            current = fam
            continue
        if line.startswith('#') or line == '':
            raise Fault('line %d: not a HELP, TYPE or sample line: %r' % (n, line))
        m = SAMPLE.match(line)
        if not m:
            raise Fault('line %d: bad sample line: %r' % (n, line))
        parse_sample(m, families, current, series, hist, n)
    check_histograms(hist)
    return series


def expect(series, arg):
    m = re.match(r'^(.*?)(>=|=)([^=]*)$', arg)
    key, op, want = m.group(1), m.group(2), float(m.group(3))
    if key not in series:
        raise Fault('no series %s' % key)
    got = series[key]
    if (op == '=' and got != want) or (op == '>=' and got < want):
        raise Fault('%s is %s, expected %s %s' % (key, got, op, want))


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        text = f.read()
    try:
        series = parse(text)
        for arg in sys.argv[2:]:
            expect(series, arg)
    except Fault as e:
        print('prom_parse: %s' % e)
        sys.exit(1)
    print('%d series' % len(series))


if __name__ == '__main__':
    main()
