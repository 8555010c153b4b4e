/* The classification of classify.h. The tables are small (tens of
 * names), so a linear search is plenty. */
#include "classify.h"

#include <string.h>

static const char *lookup(const hc_entry_t *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].why;
    return NULL;
}

static bool is_hooked(const char *name)
{
    for (size_t i = 0; i < hc_hooked_count; i++)
        if (strcmp(hc_hooked[i], name) == 0)
            return true;
    return false;
}

bool hc_is_glibc(const char *soname)
{
    static const char *const stems[] = {"libc.so", "libpthread.so", "libresolv.so", "librt.so",
                                        "libdl.so", "ld-linux", "ld64.so", "ld.so"};
    const char *base = strrchr(soname, '/');
    base = base ? base + 1 : soname;
    for (size_t i = 0; i < sizeof stems / sizeof stems[0]; i++)
        if (strncmp(base, stems[i], strlen(stems[i])) == 0)
            return true;
    return false;
}

hc_class_t hc_classify(const hc_import_t *imp, const char **why)
{
    *why = NULL;
    bool hooked = is_hooked(imp->name);
    const char *blocks = lookup(hc_blocking, hc_blocking_count, imp->name);
    if (imp->lib ? !hc_is_glibc(imp->lib) : !hooked && !blocks)
        return HC_OTHER;
    if (hooked) {
        *why = lookup(hc_hooked_notes, hc_hooked_notes_count, imp->name);
        return HC_HOOKED;
    }
    *why = blocks;
    return blocks ? HC_BLOCKS : HC_FINE;
}
