/* Which imported functions spindle's hooks make cooperative, which can
 * block a worker thread, and which are harmless. Three tables decide:
 * hc_hooked, generated at build time from hooks/preload.sym (the single
 * source of what is hooked), and the curated hc_blocking and
 * hc_hooked_notes of blocks_table.c. A name in hc_hooked is hooked even
 * when hc_blocking lists it too. */
#ifndef HC_CLASSIFY_H
#define HC_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "elf_read.h"

typedef enum hc_class {
    HC_OTHER,  /* not glibc's: not listed */
    HC_HOOKED, /* hooked: cooperative in a fiber */
    HC_BLOCKS, /* not hooked and can block the worker */
    HC_FINE,   /* any other glibc function */
} hc_class_t;

/* A function and one line on why it matters and what to do. */
typedef struct hc_entry {
    const char *name, *why;
} hc_entry_t;

extern const char *const hc_hooked[];
extern const size_t hc_hooked_count;
extern const hc_entry_t hc_blocking[];
extern const size_t hc_blocking_count;
extern const hc_entry_t hc_hooked_notes[];
extern const size_t hc_hooked_notes_count;

/* Whether soname (or a path to it) is one of glibc's libraries, which
 * provide the calls classified here: libc, libpthread, libresolv, librt,
 * libdl and the dynamic loader. */
bool hc_is_glibc(const char *soname);

/* The class of imp and, for HC_BLOCKS and for hooked calls with a
 * caveat, the line saying why (else NULL). An import without a version
 * counts as glibc's only when a table names it. */
hc_class_t hc_classify(const hc_import_t *imp, const char **why);

#endif
