/* spindle-hookcheck (tools/hookcheck) run as a program on the fixtures
 * of fixtures/: exit statuses, and each name in the group it
 * belongs to; bad and damaged files end with status 2 or a clean
 * result, never a crash. */
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elf_writer.h"
#include "testutil.h"

/* What one run of the tool printed, and its wait status. */
typedef struct result {
    int status;
    char *out, *err;
} result_t;

static char dir[256];

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Run the tool with args (NULL-terminated) and LD_LIBRARY_PATH set to
 * ld_path (NULL: unset), output into files. */
static result_t run_with(const char *ld_path, const char *const *args)
{
    char out[300], err[300];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(err, sizeof err, "%s/stderr", dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (ld_path)
            setenv("LD_LIBRARY_PATH", ld_path, 1);
        else
            unsetenv("LD_LIBRARY_PATH");
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        char *argv[16] = {HC_TOOL};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = (char *)args[i];
        execv(HC_TOOL, argv);
        _exit(127);
    }
    result_t r;
    ck_assert_int_eq(waitpid(pid, &r.status, 0), pid);
    r.out = slurp(out, NULL);
    r.err = slurp(err, NULL);
    return r;
}

/* The fixtures must be found through their own run path. */
static result_t run(const char *const *args)
{
    return run_with(NULL, args);
}

static void result_free(result_t *r)
{
    free(r->out);
    free(r->err);
}

static int exit_code(const result_t *r)
{
    ck_assert_msg(WIFEXITED(r->status), "the tool died (status %d); stderr: %s", r->status,
                  r->err);
    return WEXITSTATUS(r->status);
}

/* The group ("hooked", "blocks", "fine") name is listed in, in the part
 * of the output about file (its header line starts with file), or NULL. */
static const char *group_of(const char *out, const char *file, const char *name)
{
    const char *group = NULL;
    bool inside = false;
    for (const char *line = out; *line;) {
        size_t len = strcspn(line, "\n");
        if (line[0] != ' ') {
            inside = strncmp(line, file, strlen(file)) == 0 &&
                     (line[strlen(file)] == ':' || line[strlen(file)] == ' ');
            group = NULL;
        } else if (inside && strncmp(line, "  hooked", 8) == 0) {
            group = "hooked";
        } else if (inside && strncmp(line, "  blocks: offload it", 20) == 0) {
            group = "blocks";
        } else if (inside && strncmp(line, "  fine", 6) == 0) {
            group = "fine";
        } else if (inside && strncmp(line, "  ", 2) == 0 && line[2] != ' ') {
            group = NULL; /* "  needs ..." */
        } else if (inside && group && strncmp(line, "    note:", 9) != 0) {
            /* "    a@V b c": names; "    a@V: why": one name. */
            for (const char *p = line + 4; p < line + len;) {
                size_t w = strcspn(p, " @:\n");
                if (w == strlen(name) && strncmp(p, name, w) == 0)
                    return group;
                if (strcmp(group, "blocks") == 0)
                    break;
                p += strcspn(p, " \n");
                p += *p == ' ';
            }
        }
        line += len + (line[len] == '\n');
    }
    return NULL;
}

#define ASSERT_GROUP(r, file, name, want)                                                   \
    do {                                                                                    \
        const char *g_ = group_of((r)->out, (file), (name));                                \
        ck_assert_msg(g_ && strcmp(g_, (want)) == 0, "%s: %s in %s, not %s; output:\n%s", \
                      (file), (name), g_ ? g_ : "no group", (want), (r)->out);              \
    } while (0)

static void setup(void)
{
    sp_test_make_dir(dir, sizeof dir, "hookcheck");
}

static void teardown(void)
{
    sp_test_remove_dir(dir);
}

START_TEST(blocking_calls_are_listed_with_a_reason_and_exit_1)
{
    result_t r = run((const char *[]){HC_FIX_BLOCKS, NULL});
    ck_assert_int_eq(exit_code(&r), 1);
    ASSERT_GROUP(&r, HC_FIX_BLOCKS, "waitpid", "blocks");
    ASSERT_GROUP(&r, HC_FIX_BLOCKS, "flock", "blocks");
    ASSERT_GROUP(&r, HC_FIX_BLOCKS, "read", "hooked");
    ck_assert_ptr_nonnull(strstr(r.out, "waitpid@GLIBC_2"));
    ck_assert_ptr_nonnull(strstr(r.out, "waits for a child process"));
    ck_assert_ptr_nonnull(strstr(r.out, "summary: 1 file checked, 0 unreadable; 1 hooked, 2 blocking"));
    result_free(&r);
}
END_TEST

START_TEST(only_hooked_calls_exit_0)
{
    result_t r = run((const char *[]){HC_FIX_HOOKED, NULL});
    ck_assert_int_eq(exit_code(&r), 0);
    ASSERT_GROUP(&r, HC_FIX_HOOKED, "read", "hooked");
    ASSERT_GROUP(&r, HC_FIX_HOOKED, "poll", "hooked");
    ASSERT_GROUP(&r, HC_FIX_HOOKED, "__libc_start_main", "fine");
    ck_assert_ptr_nonnull(strstr(r.out, "blocks: offload it (0)"));
    result_free(&r);
}
END_TEST

START_TEST(quiet_omits_the_fine_list)
{
    result_t r = run((const char *[]){HC_FIX_HOOKED, "-q", NULL}); /* options anywhere */
    ck_assert_int_eq(exit_code(&r), 0);
    ASSERT_GROUP(&r, HC_FIX_HOOKED, "read", "hooked");
    ck_assert_ptr_null(group_of(r.out, HC_FIX_HOOKED, "__libc_start_main"));
    result_free(&r);
}
END_TEST

START_TEST(fdopen_points_to_sp_fdopen)
{
    result_t r = run((const char *[]){HC_FIX_FDOPEN, NULL});
    ck_assert_int_eq(exit_code(&r), 1);
    ASSERT_GROUP(&r, HC_FIX_FDOPEN, "fdopen", "blocks");
    ck_assert_ptr_nonnull(strstr(r.out, "sp_fdopen"));
    result_free(&r);
}
END_TEST

START_TEST(a_library_that_blocks_is_found_only_with_deps)
{
    result_t r = run((const char *[]){HC_FIX_USES_LIB, NULL});
    ck_assert_int_eq(exit_code(&r), 0);
    ck_assert_ptr_null(strstr(r.out, "system"));
    ck_assert_ptr_nonnull(strstr(r.out, "--deps"));
    result_free(&r);

    /* Twice: the library is checked once all the same. */
    r = run((const char *[]){"--deps", HC_FIX_USES_LIB, HC_FIX_USES_LIB, NULL});
    ck_assert_int_eq(exit_code(&r), 1);
    char lib[512];
    const char *at = strstr(r.out, "needs libfix_system.so: ");
    ck_assert_msg(at != NULL, "%s", r.out);
    at += strlen("needs libfix_system.so: ");
    snprintf(lib, sizeof lib, "%.*s", (int)strcspn(at, " \n"), at);
    ck_assert_ptr_nonnull(strstr(lib, "/lib/libfix_system.so")); /* by $ORIGIN/../lib */
    ASSERT_GROUP(&r, lib, "system", "blocks");
    const char *first = strstr(r.out, "libfix_system.so (needed by");
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_null(strstr(first + 1, "libfix_system.so (needed by"));
    ck_assert_ptr_nonnull(strstr(r.out, "needs libc.so.6: glibc, the provider of these calls: not scanned"));
    result_free(&r);
}
END_TEST

/* A copy of the program away from its $ORIGIN/../lib: found through
 * LD_LIBRARY_PATH, else reported as not found. */
START_TEST(a_library_is_found_through_ld_library_path)
{
    size_t len;
    char *prog = slurp(HC_FIX_USES_LIB, &len);
    char path[400], libdir[400];
    snprintf(path, sizeof path, "%s/moved", dir);
    spit(path, prog, len);
    free(prog);
    result_t r = run((const char *[]){"--deps", path, NULL});
    ck_assert_int_eq(exit_code(&r), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "needs libfix_system.so: not found, not checked"));
    result_free(&r);

    snprintf(libdir, sizeof libdir, "%s", HC_FIX_USES_LIB);
    *strrchr(libdir, '/') = '\0';
    strcpy(strrchr(libdir, '/'), "/lib");
    char want[500];
    snprintf(want, sizeof want, "needs libfix_system.so: %s/libfix_system.so\n", libdir);
    r = run_with(libdir, (const char *[]){"--deps", path, NULL});
    ck_assert_int_eq(exit_code(&r), 1);
    ck_assert_msg(strstr(r.out, want), "want \"%s\" in:\n%s", want, r.out);
    result_free(&r);
}
END_TEST

/* Every function hooks/preload.sym exports (but the sp_* entry points),
 * read here independently of the build's generator. */
START_TEST(every_function_of_preload_sym_shows_as_hooked)
{
    char *sym = slurp(HC_PRELOAD_SYM, NULL);
    char *global = strstr(sym, "global:"), *local = strstr(sym, "local:");
    ck_assert(global && local && global < local);
    *local = '\0';
    result_t r = run((const char *[]){HC_FIX_ALL_HOOKED, NULL});
    ck_assert_int_eq(exit_code(&r), 0);
    int n = 0;
    for (char *tok = strtok(global + 7, " \t\n;"); tok; tok = strtok(NULL, " \t\n;")) {
        if (strncmp(tok, "sp_", 3) == 0)
            continue;
        ASSERT_GROUP(&r, HC_FIX_ALL_HOOKED, tok, "hooked");
        n++;
    }
    ck_assert_int_gt(n, 40);
    result_free(&r);
    free(sym);
}
END_TEST

/* ELF32 and ELF64, little and big endian, from elf_writer.c: versions
 * read in every format, an unversioned import found by its name, a
 * defined symbol not taken for an import. */
START_TEST(every_class_and_byte_order_is_read)
{
    char path[400];
    for (int i = 0; i < 4; i++) {
        bool is64 = i & 1, big = i & 2;
        snprintf(path, sizeof path, "%s/elf%d%s", dir, is64 ? 64 : 32, big ? "be" : "le");
        ck_assert(hc_write_test_elf(path, is64, big));
        result_t r = run((const char *[]){"--deps", path, NULL});
        ck_assert_int_eq(exit_code(&r), 1);
        ASSERT_GROUP(&r, path, "waitpid", "blocks");
        ASSERT_GROUP(&r, path, "flock", "blocks");
        ASSERT_GROUP(&r, path, "read", "hooked");
        ck_assert_ptr_nonnull(strstr(r.out, "waitpid@GLIBC_2.0: "));
        ck_assert_ptr_nonnull(strstr(r.out, "    read@GLIBC_2.0\n"));
        ck_assert_ptr_null(strstr(r.out, "main"));
        ck_assert_ptr_nonnull(strstr(r.out, "needs libnowhere.so: not found, not checked"));
        ck_assert_ptr_nonnull(strstr(r.out, "needs libc.so.6: glibc"));
        result_free(&r);
    }
}
END_TEST

/* A bad FILE: status 2 and a message naming it (and what is wrong). */
static void expect_unreadable(const char *path, const char *why)
{
    result_t r = run((const char *[]){path, NULL});
    ck_assert_int_eq(exit_code(&r), 2);
    char want[600];
    snprintf(want, sizeof want, "spindle-hookcheck: %s: %s", path, why);
    ck_assert_msg(strstr(r.err, want), "want \"%s\" in: %s", want, r.err);
    result_free(&r);
}

START_TEST(bad_files_exit_2_with_a_message)
{
    size_t len;
    char *elf = slurp(HC_FIX_HOOKED, &len);
    char path[400];
    snprintf(path, sizeof path, "%s/text", dir);
    spit(path, "hello, not an ELF file\n", 23);
    expect_unreadable(path, "not an ELF file");
    snprintf(path, sizeof path, "%s/empty", dir);
    spit(path, "", 0);
    expect_unreadable(path, "not an ELF file");
    snprintf(path, sizeof path, "%s/header", dir);
    spit(path, elf, 40); /* the ELF64 header is 64 bytes */
    expect_unreadable(path, "the ELF header ends past the end of the file (truncated?)");
    Elf64_Ehdr eh;
    memcpy(&eh, elf, sizeof eh);
    size_t cut = eh.e_shoff + 3 * (size_t)eh.e_shentsize + 10; /* 3 of its headers and a bit */
    ck_assert_uint_lt(cut, len);
    snprintf(path, sizeof path, "%s/sections", dir);
    spit(path, elf, cut);
    expect_unreadable(path, "the section headers end past the end of the file (truncated?)");
    expect_unreadable(dir, "is a directory");
    snprintf(path, sizeof path, "%s/missing", dir);
    expect_unreadable(path, "No such file or directory");
    free(elf);

    /* One bad file among good ones: the good ones are still checked. */
    result_t r = run((const char *[]){HC_FIX_HOOKED, path, HC_FIX_BLOCKS, NULL});
    ck_assert_int_eq(exit_code(&r), 2);
    ASSERT_GROUP(&r, HC_FIX_BLOCKS, "waitpid", "blocks");
    ck_assert_ptr_nonnull(strstr(r.out, "2 files checked, 1 unreadable"));
    result_free(&r);
}
END_TEST

/* Damaged copies of a real file: cut at many lengths, random bytes
 * behind a valid identification, bytes of the tail (where the section
 * headers are) overwritten. Each ends with 0, 1 or 2, never a signal. */
START_TEST(damaged_files_never_crash)
{
    size_t len;
    char *elf = slurp(HC_FIX_BLOCKS, &len);
    char *copy = malloc(len);
    char path[400];
    snprintf(path, sizeof path, "%s/damaged", dir);
    unsigned seed = 12345;
    for (int i = 0; i < 120; i++) {
        size_t n = len;
        memcpy(copy, elf, len);
        if (i < 40) {
            n = len * (size_t)i / 40; /* truncated */
        } else if (i < 60) {
            for (size_t k = EI_NIDENT; k < n; k++) /* random after the ident */
                copy[k] = (char)rand_r(&seed);
        } else {
            for (int k = 0; k < 16; k++) /* the tail (section headers) scribbled on */
                copy[len - 1 - (size_t)rand_r(&seed) % (len / 4)] = (char)rand_r(&seed);
        }
        spit(path, copy, n);
        result_t r = run((const char *[]){"--deps", path, NULL});
        int code = exit_code(&r);
        ck_assert_msg(code >= 0 && code <= 2, "case %d: exit %d", i, code);
        if (code == 2)
            ck_assert_ptr_nonnull(strstr(r.err, path));
        result_free(&r);
    }
    free(copy);
    free(elf);
}
END_TEST

START_TEST(usage_errors_exit_2_and_help_exits_0)
{
    result_t r = run((const char *[]){NULL});
    ck_assert_int_eq(exit_code(&r), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "no FILE given"));
    result_free(&r);
    r = run((const char *[]){"--bogus", HC_FIX_HOOKED, NULL});
    ck_assert_int_eq(exit_code(&r), 2);
    ck_assert_ptr_nonnull(strstr(r.err, "unknown option --bogus"));
    result_free(&r);
    r = run((const char *[]){"--help", NULL});
    ck_assert_int_eq(exit_code(&r), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: spindle-hookcheck"));
    result_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hookcheck");
    SP_TEST_CASE(s, "hookcheck", 0, setup, teardown,
                 blocking_calls_are_listed_with_a_reason_and_exit_1, only_hooked_calls_exit_0,
                 quiet_omits_the_fine_list, fdopen_points_to_sp_fdopen,
                 a_library_that_blocks_is_found_only_with_deps,
                 a_library_is_found_through_ld_library_path,
                 every_function_of_preload_sym_shows_as_hooked, every_class_and_byte_order_is_read,
                 bad_files_exit_2_with_a_message,
                 damaged_files_never_crash, usage_errors_exit_2_and_help_exits_0);
    return sp_test_run(s);
}
