/* Finding a DT_NEEDED library the way glibc's dynamic loader does,
 * without running anything (ldd may execute the program it is given):
 *   a name with a slash is a path;
 *   else DT_RPATH of the object and then of its loaders up to the
 *   executable (only when the object has no DT_RUNPATH), LD_LIBRARY_PATH,
 *   the object's DT_RUNPATH, /etc/ld.so.cache, the default directories.
 * $ORIGIN (and ${ORIGIN}) in a search path is the directory of the object
 * that has it; $LIB and $PLATFORM are not expanded (such a directory is
 * not searched). A file of another ELF class or machine is skipped, as
 * the loader skips it. */
#ifndef HC_RESOLVE_H
#define HC_RESOLVE_H

#include <stdbool.h>
#include <stdint.h>

/* An object whose DT_NEEDED entries are looked up, and who loaded it. */
typedef struct hc_loader {
    const char *rpath, *runpath; /* NULL when absent */
    const char *origin;          /* the directory of its file */
    const struct hc_loader *parent;
} hc_loader_t;

/* The file needed resolves to for obj (of class is64 and machine), in
 * memory of the caller's to free(), or NULL when none is found. */
char *hc_resolve(const char *needed, const hc_loader_t *obj, bool is64, uint16_t machine);

#endif
