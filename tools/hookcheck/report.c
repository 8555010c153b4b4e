/* The groups of report.h, sorted by name; names lists wrapped to fit a
 * terminal. */
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "classify.h"

#define WIDTH 79
#define INDENT "    "

typedef struct item {
    const hc_import_t *imp;
    const char *why;
} item_t;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const item_t *)a)->imp->name, ((const item_t *)b)->imp->name);
}

const char *hc_printable(char *buf, size_t size, const char *s)
{
    size_t n = 0;
    for (; s[n] && n + 1 < size; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    buf[n] = '\0';
    return buf;
}

/* name@VERSION, or the name alone (always, when !versioned). */
static int label(char *buf, size_t size, const hc_import_t *imp, bool versioned)
{
    int n = versioned && imp->version ? snprintf(buf, size, "%s@%s", imp->name, imp->version)
                                      : snprintf(buf, size, "%s", imp->name);
    hc_printable(buf, size, buf);
    return n < 0 || (size_t)n < size ? n : (int)size - 1;
}

static void print_wrapped(FILE *out, const item_t *items, size_t n, bool versioned)
{
    size_t col = 0;
    char buf[512];
    for (size_t i = 0; i < n; i++) {
        int len = label(buf, sizeof buf, items[i].imp, versioned);
        if (len < 0)
            continue;
        if (col > 0 && col + 1 + (size_t)len > WIDTH) {
            fputc('\n', out);
            col = 0;
        }
        col += (size_t)fprintf(out, "%s%s", col ? " " : INDENT, buf);
    }
    if (col > 0)
        fputc('\n', out);
}

static void print_reasons(FILE *out, const item_t *items, size_t n, const char *prefix)
{
    char buf[512];
    bool note = *prefix != '\0'; /* a note follows the versioned list: name only */
    for (size_t i = 0; i < n; i++) {
        if (!items[i].why)
            continue;
        label(buf, sizeof buf, items[i].imp, !note);
        fprintf(out, INDENT "%s%s: %s\n", prefix, buf, items[i].why);
    }
}

int hc_report(FILE *out, const hc_elf_t *e, bool quiet, hc_counts_t *sum)
{
    if (!e->has_dynsym) {
        fprintf(out, "  no dynamic symbols: statically linked, nothing imported\n");
        return 0;
    }
    /* One array, three groups: hooked from the front, the others after. */
    item_t *group[3];
    size_t count[3] = {0};
    for (int g = 0; g < 3; g++)
        if (!(group[g] = calloc(e->nimports ? e->nimports : 1, sizeof(item_t)))) {
            while (g-- > 0)
                free(group[g]);
            return -1;
        }
    for (size_t i = 0; i < e->nimports; i++) {
        const char *why;
        hc_class_t c = hc_classify(&e->imports[i], &why);
        int g = c == HC_HOOKED ? 0 : c == HC_BLOCKS ? 1 : 2;
        if (c != HC_OTHER)
            group[g][count[g]++] = (item_t){&e->imports[i], why};
    }
    for (int g = 0; g < 3; g++)
        qsort(group[g], count[g], sizeof(item_t), by_name);

    fprintf(out, "  hooked (%zu)%s\n", count[0], count[0] ? ":" : "");
    print_wrapped(out, group[0], count[0], true);
    print_reasons(out, group[0], count[0], "note: ");
    fprintf(out, "  blocks: offload it (%zu)%s\n", count[1], count[1] ? ":" : "");
    print_reasons(out, group[1], count[1], "");
    fprintf(out, "  fine (%zu)%s\n", count[2], count[2] && !quiet ? ":" : "");
    if (!quiet)
        print_wrapped(out, group[2], count[2], false);
    sum->hooked += count[0];
    sum->blocks += count[1];
    sum->fine += count[2];
    for (int g = 0; g < 3; g++)
        free(group[g]);
    return 0;
}
