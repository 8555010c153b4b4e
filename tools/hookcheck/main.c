/* spindle-hookcheck FILE...: which libc calls an ELF program or library
 * imports are hooked by spindle, which can block a worker, which are
 * harmless; with --deps, the same for the libraries it loads. Reads the
 * files only: nothing is executed (unlike ldd). Exit status: 0 nothing
 * blocks, 1 something blocks, 2 a usage error or a file that could not
 * be read. docs/hooks.md, "Checking a program: spindle-hookcheck". */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "classify.h"
#include "elf_read.h"
#include "report.h"
#include "resolve.h"

#define PROG "spindle-hookcheck"

static const char usage[] =
    "usage: " PROG " [--deps] [--quiet] [--] FILE...\n"
    "Lists the glibc functions each ELF executable or shared library FILE imports:\n"
    "  hooked               spindle's hooks make them cooperative in a fiber\n"
    "  blocks: offload it   not hooked and can block a worker thread (with why)\n"
    "  fine                 every other glibc function\n"
    "  -d, --deps   also check the libraries FILE needs, found as the dynamic loader\n"
    "               would (RPATH/RUNPATH, LD_LIBRARY_PATH, ld.so.cache), each once;\n"
    "               glibc's own libraries provide these calls and are not scanned\n"
    "  -q, --quiet  omit the list of fine functions\n"
    "  -h, --help   this text\n"
    "Exit status: 0 nothing blocks, 1 something blocks, 2 usage error or a file\n"
    "that cannot be read or is no valid ELF file.\n";

/* A file to check: a FILE of the command line or a library one needs. */
typedef struct node {
    char *path, *origin, *rpath, *runpath;
    const struct node *parent;
    struct node *next; /* in the queue of files to check */
    bool known; /* stat() worked: dev and ino identify the file */
    dev_t dev;
    ino_t ino;
} node_t;

typedef struct run {
    bool deps, quiet;
    node_t *head, *tail; /* every file, checked in this order */
    hc_counts_t sum;
    size_t files, unreadable;
} run_t;

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Queue path unless the same file was queued before (then *seen). */
static node_t *enqueue(run_t *r, const char *path, const node_t *parent, bool *seen)
{
    struct stat st;
    bool known = stat(path, &st) == 0; /* else it fails to load, with the reason */
    *seen = false;
    for (node_t *n = r->head; known && n; n = n->next)
        if (n->known && n->dev == st.st_dev && n->ino == st.st_ino)
            return *seen = true, n;
    node_t *n = calloc(1, sizeof *n);
    if (!n || !(n->path = strdup(path))) {
        free(n);
        return NULL;
    }
    n->known = known;
    n->dev = known ? st.st_dev : 0;
    n->ino = known ? st.st_ino : 0;
    n->parent = parent;
    if (r->tail)
        r->tail->next = n;
    else
        r->head = n;
    r->tail = n;
    return n;
}

/* The directory of n's file, for $ORIGIN: resolved for a FILE, as found
 * for a library (as the loader does). */
static char *origin_of(const node_t *n)
{
    char buf[PATH_MAX];
    const char *p = n->path;
    if (!n->parent && realpath(n->path, buf))
        p = buf;
    char *copy = strdup(p);
    char *dir = copy ? strdup(dirname(copy)) : NULL;
    free(copy);
    return dir;
}

/* One line per DT_NEEDED entry of e, queueing the libraries to check. */
static void follow_needed(run_t *r, node_t *n, const hc_elf_t *e)
{
    n->rpath = dup_or_null(e->rpath);
    n->runpath = dup_or_null(e->runpath);
    n->origin = origin_of(n);
    hc_loader_t chain[64];
    size_t depth = 0;
    for (const node_t *a = n; a && depth < 64; a = a->parent, depth++)
        chain[depth] = (hc_loader_t){a->rpath, a->runpath, a->origin ? a->origin : ".", NULL};
    for (size_t i = 0; i + 1 < depth; i++)
        chain[i].parent = &chain[i + 1];
    char shown[256], found[PATH_MAX];
    for (size_t i = 0; i < e->nneeded; i++) {
        const char *name = hc_printable(shown, sizeof shown, e->needed[i]);
        if (hc_is_glibc(e->needed[i])) {
            printf("  needs %s: glibc, the provider of these calls: not scanned\n", name);
            continue;
        }
        char *path = hc_resolve(e->needed[i], &chain[0], e->is64, e->machine);
        bool seen = false;
        if (!path)
            printf("  needs %s: not found, not checked\n", name);
        else if (!enqueue(r, path, n, &seen))
            printf("  needs %s: out of memory, not checked\n", name);
        else
            printf("  needs %s: %s%s\n", name, hc_printable(found, sizeof found, path),
                   seen ? " (checked once: see its section)" : "");
        free(path);
    }
}

/* Check one queued file (an unreadable one is counted). */
static void check(run_t *r, node_t *n)
{
    hc_elf_t e;
    char err[256];
    if (hc_elf_load(&e, n->path, err, sizeof err) < 0) {
        fflush(stdout);
        fprintf(stderr, PROG ": %s: %s\n", n->path, err);
        r->unreadable++;
        return;
    }
    r->files++;
    char path[PATH_MAX], parent[PATH_MAX];
    hc_printable(path, sizeof path, n->path);
    if (n->parent)
        printf("%s (needed by %s):\n", path, hc_printable(parent, sizeof parent, n->parent->path));
    else
        printf("%s:\n", path);
    if (hc_report(stdout, &e, r->quiet, &r->sum) < 0) {
        fprintf(stderr, PROG ": %s: out of memory\n", n->path);
        r->unreadable++;
    } else if (r->deps) {
        follow_needed(r, n, &e);
    } else if (e.nneeded) {
        printf("  needs %zu librar%s (--deps checks %s too)\n", e.nneeded,
               e.nneeded == 1 ? "y" : "ies", e.nneeded == 1 ? "it" : "them");
    }
    hc_elf_free(&e);
}

/* Options may come anywhere before "--"; the other arguments are the
 * FILEs, queued in order. */
static int parse_args(run_t *r, int argc, char **argv)
{
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool seen;
        if (options && strcmp(a, "--") == 0) {
            options = false;
        } else if (options && (strcmp(a, "-d") == 0 || strcmp(a, "--deps") == 0)) {
            r->deps = true;
        } else if (options && (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)) {
            r->quiet = true;
        } else if (options && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            fputs(usage, stdout);
            exit(0);
        } else if (options && a[0] == '-' && a[1]) {
            fprintf(stderr, PROG ": unknown option %s\n%s", a, usage);
            return -1;
        } else if (!enqueue(r, a, NULL, &seen)) {
            fprintf(stderr, PROG ": out of memory\n");
            return -1;
        }
    }
    if (!r->head) {
        fprintf(stderr, PROG ": no FILE given\n%s", usage);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    run_t r = {0};
    if (parse_args(&r, argc, argv) < 0)
        return 2;
    for (node_t *n = r.head; n; n = n->next)
        check(&r, n);
    printf("summary: %zu file%s checked, %zu unreadable; %zu hooked, %zu blocking, %zu fine\n",
           r.files, r.files == 1 ? "" : "s", r.unreadable, r.sum.hooked, r.sum.blocks,
           r.sum.fine);
    while (r.head) {
        node_t *n = r.head;
        r.head = n->next;
        free(n->path);
        free(n->origin);
        free(n->rpath);
        free(n->runpath);
        free(n);
    }
    return r.unreadable ? 2 : r.sum.blocks ? 1 : 0;
}
