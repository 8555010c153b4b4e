/* The per-file part of spindle-hookcheck's output: an ELF file's glibc
 * imports in the groups "hooked", "blocks: offload it" (each with its
 * reason) and "fine". */
#ifndef HC_REPORT_H
#define HC_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "elf_read.h"

typedef struct hc_counts {
    size_t hooked, blocks, fine;
} hc_counts_t;

/* s copied into buf with control characters as '?': names from a file
 * may hold any bytes, and are printed to a terminal. Returns buf. */
const char *hc_printable(char *buf, size_t size, const char *s);

/* Print e's groups to out (quiet: the fine group's count only) and add
 * its counts to *sum. -1 when out of memory, else 0. */
int hc_report(FILE *out, const hc_elf_t *e, bool quiet, hc_counts_t *sum);

#endif
