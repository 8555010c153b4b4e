#!/usr/bin/env python3
"""prom_parse.py refuses what the text format 0.0.4 does not allow (each
bad page below) and accepts the good one: the reader the metrics tests
trust must itself be strict."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom_parse  # noqa: E402

HEAD = '# HELP a_total A.\n# TYPE a_total counter\n'
HIST = '# HELP h H.\n# TYPE h histogram\n'
GOOD = (HEAD + 'a_total{x="1"} 3\na_total{x="q\\"\\\\\\n"} 4\n' + HIST +
        'h_bucket{le="0.1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 0.5\nh_count 2\n'
        '# HELP g G \\\\ \\n.\n# TYPE g gauge\ng NaN\ng{a="b"} -Inf\n')
BAD = {
    'no newline at the end': HEAD + 'a_total 1',
    'sample before HELP/TYPE': 'a_total 1\n' + HEAD,
    'TYPE without HELP': '# TYPE a_total counter\na_total 1\n',
    'a family split': HEAD + 'a_total{x="1"} 1\n' + HIST + 'h_bucket{le="+Inf"} 0\n'
                      'h_sum 0\nh_count 0\na_total{x="2"} 1\n',
    'a series twice': HEAD + 'a_total 1\na_total 2\n',
    'bad name': HEAD + 'a-total 1\n',
    'bad value': HEAD + 'a_total one\n',
    'unquoted label': HEAD + 'a_total{x=1} 1\n',
    'bad escape': HEAD + 'a_total{x="\\t"} 1\n',
    'a label twice': HEAD + 'a_total{x="1",x="2"} 1\n',
    'a comment line': HEAD + '# just a comment\na_total 1\n',
    'an empty line': HEAD + '\na_total 1\n',
    'no +Inf bucket': HIST + 'h_bucket{le="1"} 1\nh_sum 1\nh_count 1\n',
    'buckets going down': HIST + 'h_bucket{le="1"} 2\nh_bucket{le="2"} 1\n'
                          'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n',
    '+Inf != _count': HIST + 'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n',
    'no _sum': HIST + 'h_bucket{le="+Inf"} 2\nh_count 2\n',
    'a counter with _bucket': HEAD + 'a_total_bucket 1\n',
    'two TYPE lines': HEAD + '# TYPE a_total counter\na_total 1\n',
}


def main():
    prom_parse.parse(GOOD)
    failed = 0
    for why, page in BAD.items():
        try:
            prom_parse.parse(page)
        except prom_parse.Fault:
            continue
        print('accepted, but should not: %s' % why)
        failed = 1
    print('%d bad pages refused' % (len(BAD) - failed))
    sys.exit(failed)


if __name__ == '__main__':
    main()
