/* The ELF reader (elf_read.h). Every structure is read field by field
 * through rd(), which assembles the value in the file's byte order, at
 * offsets taken from <elf.h>'s own Elf32_ and Elf64_ types; every range
 * is checked with in_file() before it is read. */
#include "elf_read.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bigger files are refused rather than read into memory whole. */
#define HC_MAX_FILE ((uint64_t)1 << 30)

/* A field of an ELF structure at file offset base, for either class. */
#define FIELD(e, base, T, f)                                                            \
    ((e)->is64 ? rd((e), (base) + offsetof(Elf64_##T, f), sizeof(((Elf64_##T *)0)->f)) \
               : rd((e), (base) + offsetof(Elf32_##T, f), sizeof(((Elf32_##T *)0)->f)))
#define SIZEOF(e, T) ((e)->is64 ? sizeof(Elf64_##T) : sizeof(Elf32_##T))

typedef struct section {
    uint32_t type, link, info;
    uint64_t off, size, entsize;
} section_t;

/* A version index of .gnu.version_r: the version's and the library's name. */
typedef struct verneed {
    uint16_t index;
    const char *version, *lib;
} verneed_t;

typedef struct parse {
    hc_elf_t *e;
    section_t *sec;
    size_t nsec;
    verneed_t *ver;
    size_t nver, vcap;
    char *err;
    size_t errlen;
} parse_t;

static int fail(parse_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static bool in_file(const hc_elf_t *e, uint64_t off, uint64_t len)
{
    return off <= e->size && len <= e->size - off;
}

/* n bytes (1, 2, 4 or 8) at off, already checked to be in the file. */
static uint64_t rd(const hc_elf_t *e, uint64_t off, size_t n)
{
    const unsigned char *b = e->data + off;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | b[e->big ? i : n - 1 - i];
    return v;
}

/* The NUL-terminated string at off in string table s, or NULL when it
 * runs past the table. */
static const char *str_at(const hc_elf_t *e, const section_t *s, uint64_t off)
{
    if (off >= s->size)
        return NULL;
    const char *p = (const char *)e->data + s->off + off;
    return memchr(p, 0, s->size - off) ? p : NULL;
}

/* The identification bytes and the header fields shared by the probe. */
static int parse_ident(parse_t *p)
{
    hc_elf_t *e = p->e;
    if (e->size < EI_NIDENT || memcmp(e->data, ELFMAG, SELFMAG) != 0)
        return fail(p, "not an ELF file");
    unsigned char cls = e->data[EI_CLASS], enc = e->data[EI_DATA];
    if ((cls != ELFCLASS32 && cls != ELFCLASS64) || (enc != ELFDATA2LSB && enc != ELFDATA2MSB))
        return fail(p, "ELF file of unknown class %u or byte order %u", cls, enc);
    e->is64 = cls == ELFCLASS64;
    e->big = enc == ELFDATA2MSB;
    if (!in_file(e, 0, SIZEOF(e, Ehdr)))
        return fail(p, "the ELF header ends past the end of the file (truncated?)");
    e->type = (uint16_t)FIELD(e, 0, Ehdr, e_type);
    e->machine = (uint16_t)FIELD(e, 0, Ehdr, e_machine);
    return 0;
}

/* The section header table, into p->sec. */
static int parse_sections(parse_t *p)
{
    hc_elf_t *e = p->e;
    uint64_t shoff = FIELD(e, 0, Ehdr, e_shoff);
    uint64_t entsize = FIELD(e, 0, Ehdr, e_shentsize);
    uint64_t num = FIELD(e, 0, Ehdr, e_shnum);
    if (shoff == 0)
        return fail(p, "no section headers (stripped of them?): cannot find the dynamic symbols");
    if (entsize < SIZEOF(e, Shdr))
        return fail(p, "malformed: section header size %llu", (unsigned long long)entsize);
    if (!in_file(e, shoff, entsize))
        return fail(p, "the section headers start past the end of the file (truncated?)");
    if (num == 0) /* more than SHN_LORESERVE sections: the count is in section 0 */
        num = FIELD(e, shoff, Shdr, sh_size);
    if (num > (e->size - shoff) / entsize)
        return fail(p, "the section headers end past the end of the file (truncated?)");
    p->sec = calloc(num ? num : 1, sizeof *p->sec);
    if (!p->sec)
        return fail(p, "out of memory");
    p->nsec = num;
    for (uint64_t i = 0; i < num; i++) {
        uint64_t at = shoff + i * entsize;
        section_t *s = &p->sec[i];
        s->type = (uint32_t)FIELD(e, at, Shdr, sh_type);
        s->link = (uint32_t)FIELD(e, at, Shdr, sh_link);
        s->info = (uint32_t)FIELD(e, at, Shdr, sh_info);
        s->off = FIELD(e, at, Shdr, sh_offset);
        s->size = FIELD(e, at, Shdr, sh_size);
        s->entsize = FIELD(e, at, Shdr, sh_entsize);
        if (s->type != SHT_NOBITS && s->type != SHT_NULL && !in_file(e, s->off, s->size))
            return fail(p, "section %llu ends past the end of the file (truncated?)",
                        (unsigned long long)i);
    }
    return 0;
}

static const section_t *find_section(const parse_t *p, uint32_t type)
{
    for (size_t i = 0; i < p->nsec; i++)
        if (p->sec[i].type == type)
            return &p->sec[i];
    return NULL;
}

/* The string table section s links to. */
static const section_t *linked_strtab(parse_t *p, const section_t *s)
{
    if (s->link >= p->nsec || p->sec[s->link].type != SHT_STRTAB) {
        fail(p, "malformed: a section's string table link %u", s->link);
        return NULL;
    }
    return &p->sec[s->link];
}

/* One Verneed entry at off and its Vernaux entries into p->ver. */
static int parse_verneed_entry(parse_t *p, const section_t *vs, const section_t *strs,
                               uint64_t off, uint64_t *next)
{
    hc_elf_t *e = p->e;
    if (!in_file(e, off, SIZEOF(e, Verneed)) || off + SIZEOF(e, Verneed) > vs->off + vs->size)
        return fail(p, "malformed: a version requirement past its section");
    const char *lib = str_at(e, strs, FIELD(e, off, Verneed, vn_file));
    uint64_t cnt = FIELD(e, off, Verneed, vn_cnt);
    uint64_t aux = off + FIELD(e, off, Verneed, vn_aux);
    *next = FIELD(e, off, Verneed, vn_next);
    if (!lib)
        return fail(p, "malformed: a version requirement's library name");
    for (uint64_t i = 0; i < cnt; i++) {
        if (aux + SIZEOF(e, Vernaux) > vs->off + vs->size || !in_file(e, aux, SIZEOF(e, Vernaux)))
            return fail(p, "malformed: a version requirement past its section");
        if (p->nver == p->vcap)
            return fail(p, "malformed: more version requirements than fit in their section");
        verneed_t *v = &p->ver[p->nver++];
        v->index = (uint16_t)(FIELD(e, aux, Vernaux, vna_other) & 0x7fff);
        v->version = str_at(e, strs, FIELD(e, aux, Vernaux, vna_name));
        v->lib = lib;
        if (!v->version)
            return fail(p, "malformed: a version requirement's name");
        uint64_t step = FIELD(e, aux, Vernaux, vna_next);
        if (step == 0 && i + 1 < cnt)
            return fail(p, "malformed: a version requirement's list ends early");
        aux += step;
    }
    return 0;
}

/* .gnu.version_r: which version index names which version of which
 * library. The entries of a well-formed file do not overlap, so more
 * of them than fit in the section means a malformed one (and bounds a
 * chain of offsets that loops). */
static int parse_verneed(parse_t *p)
{
    const section_t *vs = find_section(p, SHT_GNU_verneed);
    if (!vs)
        return 0;
    const section_t *strs = linked_strtab(p, vs);
    if (!strs)
        return -1;
    p->vcap = vs->size / SIZEOF(p->e, Vernaux);
    p->ver = calloc(p->vcap ? p->vcap : 1, sizeof *p->ver);
    if (!p->ver)
        return fail(p, "out of memory");
    uint64_t off = vs->off, next = 0;
    for (uint32_t i = 0; i < vs->info; i++) {
        if (parse_verneed_entry(p, vs, strs, off, &next) < 0)
            return -1;
        if (next == 0 && i + 1 < vs->info)
            return fail(p, "malformed: the version requirements' list ends early");
        off += next;
    }
    return 0;
}

static const verneed_t *find_version(const parse_t *p, uint16_t index)
{
    for (size_t i = 0; i < p->nver; i++)
        if (p->ver[i].index == index)
            return &p->ver[i];
    return NULL;
}

/* The version index of symbol i from .gnu.version (0: none). */
static int symbol_version(parse_t *p, const section_t *versym, uint64_t i, uint16_t *index)
{
    *index = 0;
    if (!versym)
        return 0;
    if (i >= versym->size / 2)
        return fail(p, "malformed: .gnu.version is shorter than .dynsym");
    *index = (uint16_t)(rd(p->e, versym->off + 2 * i, 2) & 0x7fff);
    return 0;
}

/* Whether the symbol at off is an imported function: undefined, named,
 * global or weak, a function (or untyped, as some linkers leave them). */
static bool is_import(const hc_elf_t *e, uint64_t off)
{
    unsigned info = (unsigned)FIELD(e, off, Sym, st_info);
    unsigned type = ELF64_ST_TYPE(info), bind = ELF64_ST_BIND(info);
    return FIELD(e, off, Sym, st_shndx) == SHN_UNDEF && FIELD(e, off, Sym, st_name) != 0 &&
           (bind == STB_GLOBAL || bind == STB_WEAK) &&
           (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE);
}

/* .dynsym: the imported functions, with their versions. */
static int parse_imports(parse_t *p)
{
    hc_elf_t *e = p->e;
    const section_t *ds = find_section(p, SHT_DYNSYM);
    if (!ds)
        return 0;
    e->has_dynsym = true;
    const section_t *strs = linked_strtab(p, ds);
    if (!strs)
        return -1;
    if (ds->entsize != SIZEOF(e, Sym))
        return fail(p, "malformed: .dynsym entry size %llu", (unsigned long long)ds->entsize);
    const section_t *versym = find_section(p, SHT_GNU_versym);
    uint64_t n = ds->size / ds->entsize;
    e->imports = calloc(n ? n : 1, sizeof *e->imports);
    if (!e->imports)
        return fail(p, "out of memory");
    for (uint64_t i = 1; i < n; i++) {
        uint64_t off = ds->off + i * ds->entsize;
        if (!is_import(e, off))
            continue;
        hc_import_t *imp = &e->imports[e->nimports];
        imp->name = str_at(e, strs, FIELD(e, off, Sym, st_name));
        if (!imp->name)
            return fail(p, "malformed: a symbol's name is outside its string table");
        uint16_t index;
        if (symbol_version(p, versym, i, &index) < 0)
            return -1;
        const verneed_t *v = index >= 2 ? find_version(p, index) : NULL;
        if (v) {
            imp->version = v->version;
            imp->lib = v->lib;
        }
        e->nimports++;
    }
    return 0;
}

/* .dynamic: DT_NEEDED, DT_RPATH, DT_RUNPATH. */
static int parse_dynamic(parse_t *p)
{
    hc_elf_t *e = p->e;
    const section_t *dyn = find_section(p, SHT_DYNAMIC);
    if (!dyn)
        return 0;
    const section_t *strs = linked_strtab(p, dyn);
    if (!strs)
        return -1;
    uint64_t n = dyn->size / SIZEOF(e, Dyn);
    e->needed = calloc(n ? n : 1, sizeof *e->needed);
    if (!e->needed)
        return fail(p, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = dyn->off + i * SIZEOF(e, Dyn);
        uint64_t tag = FIELD(e, off, Dyn, d_tag);
        if (tag == DT_NULL)
            break;
        if (tag != DT_NEEDED && tag != DT_RPATH && tag != DT_RUNPATH)
            continue;
        const char *s = str_at(e, strs, FIELD(e, off, Dyn, d_un.d_val));
        if (!s)
            return fail(p, "malformed: a .dynamic string is outside its string table");
        if (tag == DT_NEEDED)
            e->needed[e->nneeded++] = s;
        else if (tag == DT_RPATH)
            e->rpath = s;
        else
            e->runpath = s;
    }
    return 0;
}

/* The whole file into e->data. */
static int read_file(parse_t *p, const char *path)
{
    hc_elf_t *e = p->e;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(p, "%s", strerror(errno));
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) < 0)
        fail(p, "%s", strerror(errno));
    else if (S_ISDIR(st.st_mode))
        fail(p, "is a directory");
    else if (!S_ISREG(st.st_mode))
        fail(p, "not a regular file");
    else if ((uint64_t)st.st_size > HC_MAX_FILE)
        fail(p, "larger than %llu bytes", (unsigned long long)HC_MAX_FILE);
    else if (!(e->data = malloc(st.st_size ? (size_t)st.st_size : 1)))
        fail(p, "out of memory");
    else
        rc = 0;
    while (rc == 0 && e->size < (size_t)st.st_size) {
        ssize_t got = read(fd, e->data + e->size, (size_t)st.st_size - e->size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            rc = fail(p, "%s", strerror(errno));
        else if (got == 0)
            break; /* shrank meanwhile: parse what is there */
        else
            e->size += (size_t)got;
    }
    close(fd);
    return rc;
}

int hc_elf_load(hc_elf_t *e, const char *path, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    parse_t p = {.e = e, .err = err, .errlen = errlen};
    int rc = -1;
    if (read_file(&p, path) == 0 && parse_ident(&p) == 0 && parse_sections(&p) == 0 &&
        parse_verneed(&p) == 0 && parse_imports(&p) == 0 && parse_dynamic(&p) == 0)
        rc = 0;
    free(p.sec);
    free(p.ver);
    if (rc < 0)
        hc_elf_free(e);
    return rc;
}

void hc_elf_free(hc_elf_t *e)
{
    free(e->data);
    free(e->imports);
    free(e->needed);
    memset(e, 0, sizeof *e);
}

int hc_elf_probe(const char *path, bool *is64, uint16_t *machine)
{
    unsigned char head[sizeof(Elf64_Ehdr)];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got <= 0)
        return -1;
    hc_elf_t e = {.data = head, .size = (size_t)got};
    char err[8];
    parse_t p = {.e = &e, .err = err, .errlen = sizeof err};
    if (parse_ident(&p) < 0)
        return -1;
    *is64 = e.is64;
    *machine = e.machine;
    return 0;
}
