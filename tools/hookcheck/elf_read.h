/* A small bounds-checked reader of an ELF file's dynamic linking data:
 * the functions it imports (with their symbol versions) and its
 * DT_NEEDED / DT_RPATH / DT_RUNPATH entries. ELF32 and ELF64, either
 * byte order; it reads the section headers (.dynsym, .gnu.version,
 * .gnu.version_r, .dynamic), so a file whose section headers were
 * stripped is reported as such. Nothing is trusted: every offset, size
 * and string is checked against the file before it is read. */
#ifndef HC_ELF_READ_H
#define HC_ELF_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One undefined function symbol. The strings point into the file's
 * bytes (hc_elf_t.data). version and lib are NULL for an unversioned
 * import; lib is the library the version is required from ("libc.so.6"). */
typedef struct hc_import {
    const char *name;
    const char *version;
    const char *lib;
} hc_import_t;

typedef struct hc_elf {
    unsigned char *data; /* the whole file */
    size_t size;
    bool is64, big;
    uint16_t type, machine;
    bool has_dynsym; /* false: statically linked, nothing imported */
    hc_import_t *imports;
    size_t nimports;
    const char **needed;
    size_t nneeded;
    const char *rpath, *runpath; /* NULL when absent */
} hc_elf_t;

/* Read and parse path. 0, or -1 with a message for the user in err
 * (the file is not named in it). */
int hc_elf_load(hc_elf_t *e, const char *path, char *err, size_t errlen);
void hc_elf_free(hc_elf_t *e);

/* Only the ELF header of path: 0 with its class and machine, -1 when it
 * cannot be read or is no ELF file. For the library search, which skips
 * files of another class or machine as the dynamic loader does. */
int hc_elf_probe(const char *path, bool *is64, uint16_t *machine);

#endif
