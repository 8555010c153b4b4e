/* The library search of resolve.h. */
#include "resolve.h"

#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "elf_read.h"
#include "ldcache.h"

/* Whether path is a regular file of the wanted class and machine. */
static bool fits(const char *path, bool is64, uint16_t machine)
{
    struct stat st;
    bool c64;
    uint16_t m;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && hc_elf_probe(path, &c64, &m) == 0 &&
           c64 == is64 && m == machine;
}

/* dir (one search path entry, $ORIGIN expanded) joined with name into
 * out; false when it does not fit or names $LIB or $PLATFORM. */
static bool join(char *out, size_t size, const char *dir, size_t len, const char *origin,
                 const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t skip = 0;
        if (strncmp(dir + i, "$ORIGIN", 7) == 0)
            skip = 7;
        else if (strncmp(dir + i, "${ORIGIN}", 9) == 0)
            skip = 9;
        else if (dir[i] == '$')
            return false;
        const char *piece = skip ? origin : dir + i;
        size_t plen = skip ? strlen(origin) : 1;
        if (n + plen >= size)
            return false;
        memcpy(out + n, piece, plen);
        n += plen;
        i += skip ? skip : 1;
    }
    if (n == 0) /* an empty entry is the current directory */
        out[n++] = '.';
    int w = snprintf(out + n, size - n, "/%s", name);
    return w > 0 && (size_t)w < size - n;
}

/* The first entry of list (separated by any of seps) holding a fitting name. */
static char *search_list(const char *list, const char *seps, const char *origin, const char *name,
                         bool is64, uint16_t machine)
{
    char path[PATH_MAX];
    for (const char *p = list;;) {
        size_t len = strcspn(p, seps);
        if (join(path, sizeof path, p, len, origin, name) && fits(path, is64, machine))
            return strdup(path);
        if (p[len] == '\0')
            return NULL;
        p += len + 1;
    }
}

/* The multiarch directories Debian's loader searches by default. */
static const char *triple(uint16_t machine, bool is64)
{
    switch (machine) {
    case EM_X86_64: return is64 ? "x86_64-linux-gnu" : "x86_64-linux-gnux32";
    case EM_AARCH64: return "aarch64-linux-gnu";
    case EM_386: return "i386-linux-gnu";
    case EM_ARM: return "arm-linux-gnueabihf";
    case EM_RISCV: return "riscv64-linux-gnu";
    case EM_PPC64: return "powerpc64le-linux-gnu";
    case EM_S390: return "s390x-linux-gnu";
    default: return NULL;
    }
}

static char *search_defaults(const char *name, bool is64, uint16_t machine)
{
    char list[256];
    const char *t = triple(machine, is64);
    if (t)
        snprintf(list, sizeof list, "/lib/%s:/usr/lib/%s:/lib64:/usr/lib64:/lib:/usr/lib", t, t);
    else
        snprintf(list, sizeof list, "/lib64:/usr/lib64:/lib:/usr/lib");
    return search_list(list, ":", "", name, is64, machine);
}

char *hc_resolve(const char *needed, const hc_loader_t *obj, bool is64, uint16_t machine)
{
    if (strchr(needed, '/'))
        return fits(needed, is64, machine) ? strdup(needed) : NULL;
    char *found = NULL;
    if (!obj->runpath)
        for (const hc_loader_t *l = obj; l && !found; l = l->parent)
            if (l->rpath && !l->runpath)
                found = search_list(l->rpath, ":", l->origin, needed, is64, machine);
    const char *env = getenv("LD_LIBRARY_PATH");
    if (!found && env && *env)
        found = search_list(env, ":;", "", needed, is64, machine);
    if (!found && obj->runpath)
        found = search_list(obj->runpath, ":", obj->origin, needed, is64, machine);
    for (size_t i = 0; !found && i < hc_ldcache_count(); i++)
        if (strcmp(hc_ldcache_key(i), needed) == 0 && fits(hc_ldcache_value(i), is64, machine))
            found = strdup(hc_ldcache_value(i));
    if (!found)
        found = search_defaults(needed, is64, machine);
    return found;
}
