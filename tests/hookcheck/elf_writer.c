/* The test ELF file of elf_writer.h. Fields are stored one by one in the
 * chosen byte order at offsets from <elf.h>'s types; the parts sit at
 * fixed offsets, each well past the end of the one before. */
#include "elf_writer.h"

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define STR_OFF 0x100
#define SYM_OFF 0x200
#define VERSYM_OFF 0x300
#define VERNEED_OFF 0x340
#define DYN_OFF 0x380
#define SH_OFF 0x400
#define NSEC 7

typedef struct out {
    unsigned char buf[SH_OFF + NSEC * sizeof(Elf64_Shdr)];
    bool is64, big;
} out_t;

static void put(out_t *o, size_t off, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        o->buf[off + (o->big ? n - 1 - i : i)] = (unsigned char)(v >> (8 * i));
}

#define SET(o, base, T, f, v)                                                                 \
    ((o)->is64 ? put((o), (base) + offsetof(Elf64_##T, f), sizeof(((Elf64_##T *)0)->f), (v)) \
               : put((o), (base) + offsetof(Elf32_##T, f), sizeof(((Elf32_##T *)0)->f), (v)))
#define SIZE(o, T) ((o)->is64 ? sizeof(Elf64_##T) : sizeof(Elf32_##T))

/* The string table; the offsets of its strings below. */
static const char strtab[] = "\0libc.so.6\0GLIBC_2.0\0waitpid\0read\0flock\0main\0libnowhere.so";
enum { S_LIBC = 1, S_GLIBC = 11, S_WAITPID = 21, S_READ = 29, S_FLOCK = 34, S_MAIN = 40,
       S_NOWHERE = 45 };

static void symbols(out_t *o)
{
    /* name, defined in section (0: imported), version index */
    static const unsigned sym[][3] = {{S_WAITPID, 0, 2}, {S_READ, 0, 2}, {S_FLOCK, 0, 1},
                                      {S_MAIN, 6, 1}};
    for (size_t i = 0; i < 4; i++) {
        size_t at = SYM_OFF + (i + 1) * SIZE(o, Sym);
        SET(o, at, Sym, st_name, sym[i][0]);
        SET(o, at, Sym, st_info, ELF32_ST_INFO(STB_GLOBAL, STT_FUNC));
        SET(o, at, Sym, st_shndx, sym[i][1]);
        put(o, VERSYM_OFF + 2 * (i + 1), 2, sym[i][2]);
    }
    SET(o, VERNEED_OFF, Verneed, vn_version, 1);
    SET(o, VERNEED_OFF, Verneed, vn_cnt, 1);
    SET(o, VERNEED_OFF, Verneed, vn_file, S_LIBC);
    SET(o, VERNEED_OFF, Verneed, vn_aux, sizeof(Elf32_Verneed));
    size_t aux = VERNEED_OFF + sizeof(Elf32_Verneed);
    SET(o, aux, Vernaux, vna_other, 2);
    SET(o, aux, Vernaux, vna_name, S_GLIBC);
    static const unsigned dyn[][2] = {{DT_NEEDED, S_NOWHERE}, {DT_NEEDED, S_LIBC}, {DT_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        SET(o, DYN_OFF + i * SIZE(o, Dyn), Dyn, d_tag, dyn[i][0]);
        SET(o, DYN_OFF + i * SIZE(o, Dyn), Dyn, d_un.d_val, dyn[i][1]);
    }
}

static void sections(out_t *o)
{
    /* type, offset, size, link, info, entsize; section 0 stays zero */
    const uint64_t sec[NSEC - 1][6] = {
        {SHT_STRTAB, STR_OFF, sizeof strtab, 0, 0, 0},
        {SHT_DYNSYM, SYM_OFF, 5 * SIZE(o, Sym), 1, 1, SIZE(o, Sym)},
        {SHT_GNU_versym, VERSYM_OFF, 10, 2, 0, 2},
        {SHT_GNU_verneed, VERNEED_OFF, sizeof(Elf32_Verneed) + sizeof(Elf32_Vernaux), 1, 1, 0},
        {SHT_DYNAMIC, DYN_OFF, 3 * SIZE(o, Dyn), 1, 0, SIZE(o, Dyn)},
        {SHT_PROGBITS, SH_OFF, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < NSEC - 1; i++) {
        size_t at = SH_OFF + (i + 1) * SIZE(o, Shdr);
        SET(o, at, Shdr, sh_type, sec[i][0]);
        SET(o, at, Shdr, sh_offset, sec[i][1]);
        SET(o, at, Shdr, sh_size, sec[i][2]);
        SET(o, at, Shdr, sh_link, sec[i][3]);
        SET(o, at, Shdr, sh_info, sec[i][4]);
        SET(o, at, Shdr, sh_entsize, sec[i][5]);
    }
}

bool hc_write_test_elf(const char *path, bool is64, bool big)
{
    static out_t o;
    memset(&o, 0, sizeof o);
    o.is64 = is64;
    o.big = big;
    memcpy(o.buf, ELFMAG, SELFMAG);
    o.buf[EI_CLASS] = is64 ? ELFCLASS64 : ELFCLASS32;
    o.buf[EI_DATA] = big ? ELFDATA2MSB : ELFDATA2LSB;
    o.buf[EI_VERSION] = EV_CURRENT;
    SET(&o, 0, Ehdr, e_type, ET_DYN);
    SET(&o, 0, Ehdr, e_machine, is64 ? (big ? EM_PPC64 : EM_X86_64) : (big ? EM_PPC : EM_386));
    SET(&o, 0, Ehdr, e_version, EV_CURRENT);
    SET(&o, 0, Ehdr, e_ehsize, SIZE(&o, Ehdr));
    SET(&o, 0, Ehdr, e_shoff, SH_OFF);
    SET(&o, 0, Ehdr, e_shentsize, SIZE(&o, Shdr));
    SET(&o, 0, Ehdr, e_shnum, NSEC);
    SET(&o, 0, Ehdr, e_shstrndx, 0);
    memcpy(o.buf + STR_OFF, strtab, sizeof strtab);
    symbols(&o);
    sections(&o);
    FILE *f = fopen(path, "wb");
    size_t len = SH_OFF + NSEC * SIZE(&o, Shdr);
    bool ok = f && fwrite(o.buf, 1, len, f) == len;
    return f && fclose(f) == 0 && ok;
}
