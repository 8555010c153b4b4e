/* Configuration, reloading: listeners and atomic reloads, custom checks,
 * sections, declarations, --print-config, and readers racing a reload. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/config.h>

#include "config_fixture.h"

/* ---- listeners and atomic reload ----------------------------------------- */

typedef struct seen {
    int calls;
    int64_t old_i, new_i;
    char old_s[64], new_s[64];
    int64_t other; /* another variable, read from inside the listener */
} seen_t;

static sp_cvar_t *other_var;

static void on_int(const sp_cvar_t *v, const sp_cvalue_t *old, const sp_cvalue_t *cur,
                   void *arg)
{
    (void)v;
    seen_t *s = arg;
    s->calls++;
    s->old_i = old->u.i;
    s->new_i = cur->u.i;
    s->other = sp_cvar_int(other_var);
}

static void on_str(const sp_cvar_t *v, const sp_cvalue_t *old, const sp_cvalue_t *cur,
                   void *arg)
{
    (void)v;
    seen_t *s = arg;
    s->calls++;
    snprintf(s->old_s, sizeof s->old_s, "%s", old->u.s);
    snprintf(s->new_s, sizeof s->new_s, "%s", cur->u.s);
}

START_TEST(listeners_on_reload)
{
    setup();
    sp_cvar_t *w = sp_config_int(cfg, "w", 1, 0, 100, NULL);
    sp_cvar_t *s = sp_config_string(cfg, "s", "one", NULL);
    other_var = sp_config_int(cfg, "z", 0, 0, 100, NULL);
    seen_t sw = {0}, ss = {0};
    ck_assert_int_eq(sp_cvar_listen(w, on_int, &sw), 0);
    ck_assert_int_eq(sp_cvar_listen(s, on_str, &ss), 0);

    load_ok("l.yml", "w: 5\ns: two\nz: 7\n");
    ck_assert_int_eq(sw.calls, 1);
    ck_assert_int_eq(sw.old_i, 1);
    ck_assert_int_eq(sw.new_i, 5);
    ck_assert_int_eq(sw.other, 7); /* every value is in place before listeners */
    ck_assert_int_eq(ss.calls, 1);
    ck_assert_str_eq(ss.old_s, "one");
    ck_assert_str_eq(ss.new_s, "two");

    /* Same values again: no calls. */
    load_ok("l.yml", "w: 5\ns: two\nz: 7\n");
    ck_assert_int_eq(sw.calls, 1);
    ck_assert_int_eq(ss.calls, 1);

    /* A failing reload changes nothing and calls no one. */
    load_fails("l.yml", "w: 6\ns: three\nz: 700\n");
    ck_assert_int_eq(sw.calls, 1);
    ck_assert_int_eq(ss.calls, 1);
    ck_assert_int_eq(sp_cvar_int(w), 5);
    ck_assert_str_eq(sp_cvar_string(s), "two");

    /* cli changes call listeners too. */
    char *err;
    ck_assert_int_eq(sp_config_set(cfg, "w=9", &err), 0);
    ck_assert_int_eq(sw.calls, 2);
    ck_assert_int_eq(sw.old_i, 5);
    ck_assert_int_eq(sw.new_i, 9);
    teardown();
}
END_TEST

static int even_only(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    if (v->u.i % 2 == 0)
        return 0;
    snprintf(msg, len, "%lld is odd", (long long)v->u.i);
    return -1;
}

START_TEST(custom_check)
{
    setup();
    sp_cvar_t *e = sp_config_int(cfg, "e", 2, 0, 100, NULL);
    ck_assert_int_eq(sp_cvar_set_check(e, even_only, NULL), 0);
    ck_assert_str_eq(load_fails("c.yml", "e: 3\n"), "c.yml:1:4: e: 3 is odd\n");
    load_ok("c.yml", "e: 4\n");
    ck_assert_int_eq(sp_cvar_int(e), 4);
    teardown();
}
END_TEST

/* ---- sections ------------------------------------------------------------- */

typedef struct sect {
    int checks, applies, discards;
    char seen[256];
} sect_t;

static int sect_check(const sp_cnode_t *node, sp_config_report_t *r, void **staged,
                      void *arg)
{
    sect_t *s = arg;
    s->checks++;
    s->seen[0] = '\0';
    for (size_t i = 0; i < sp_cnode_len(node); i++) {
        const sp_cnode_t *v = sp_cnode_item(node, i);
        if (sp_cnode_kind(v) != SP_CNODE_SCALAR) {
            sp_config_error(r, v, "want a scalar for '%s'", sp_cnode_key(node, i));
            return -1;
        }
        size_t l = strlen(s->seen);
        snprintf(s->seen + l, sizeof s->seen - l, "%s=%s;", sp_cnode_key(node, i),
                 sp_cnode_text(v));
    }
    *staged = s;
    return 0;
}

static void sect_apply(void *staged, void *arg)
{
    ck_assert_ptr_eq(staged, arg);
    ((sect_t *)arg)->applies++;
}

static void sect_discard(void *staged, void *arg)
{
    ck_assert_ptr_eq(staged, arg);
    ((sect_t *)arg)->discards++;
}

START_TEST(sections_check_apply_discard)
{
    setup();
    static const sp_config_section_ops_t ops = {sect_check, sect_apply, sect_discard};
    sect_t st = {0};
    sp_cvar_t *lvl = sp_config_string(cfg, "log.level", "info", NULL);
    ck_assert_int_eq(sp_config_section(cfg, "log", &ops, &st), 0);
    ck_assert_int_eq(sp_config_section(cfg, "log.x", &ops, &st), -EEXIST);
    ck_assert_ptr_null(sp_config_int(cfg, "log", 1, 0, 1, NULL));
    ck_assert_int_eq(errno, EEXIST);

    /* Variables under the prefix are claimed first; the rest is merged over
     * files into one map, keys relative to the prefix. */
    put_file("a.yml", "log:\n  level: debug\n  a: 1\n  b: 2\n");
    put_file("b.yml", "log.b: 3\nlog:\n  c: 4\n");
    char *err;
    ck_assert_int_eq(sp_config_load(cfg, dir, &err), 0);
    ck_assert_str_eq(sp_cvar_string(lvl), "debug");
    ck_assert_str_eq(st.seen, "a=1;b=3;c=4;");
    ck_assert_int_eq(st.checks, 1);
    ck_assert_int_eq(st.applies, 1);

    /* A section error fails the load with its location... */
    ck_assert_str_eq(load_fails("b.yml", "log:\n  c: [1]\n"),
                     "b.yml:2:6: want a scalar for 'c'\n");
    ck_assert_int_eq(st.applies, 1);
    /* ... and an error elsewhere discards what the section staged. */
    ck_assert_str_eq(load_fails("b.yml", "log:\n  c: 5\n  level: [x]\n"),
                     "b.yml:3:10: log.level: expected a string, got a list\n");
    ck_assert_int_eq(st.applies, 1);
    teardown();
}
END_TEST

START_TEST(section_error_discards_other_sections)
{
    setup();
    static const sp_config_section_ops_t ops = {sect_check, sect_apply, sect_discard};
    sect_t a = {0}, b = {0};
    ck_assert_int_eq(sp_config_section(cfg, "a", &ops, &a), 0);
    ck_assert_int_eq(sp_config_section(cfg, "b", &ops, &b), 0);
    ck_assert_str_eq(load_fails("s.yml", "a: {x: 1}\nb: {y: [2]}\n"),
                     "s.yml:2:8: want a scalar for 'y'\n");
    ck_assert_int_eq(a.checks, 1);
    ck_assert_int_eq(a.discards, 1);
    ck_assert_int_eq(a.applies, 0);
    load_ok("s.yml", "a: {x: 1}\n");
    ck_assert_int_eq(a.applies, 1);
    ck_assert_int_eq(b.applies, 1); /* absent: check(NULL) and apply */
    ck_assert_str_eq(b.seen, "");
    teardown();
}
END_TEST

static int count_items(const sp_cnode_t *node, sp_config_report_t *r, void **staged,
                       void *arg)
{
    (void)r;
    *(size_t *)arg = node && sp_cnode_kind(node) == SP_CNODE_LIST ? sp_cnode_len(node) : 99;
    *staged = NULL;
    return 0;
}

START_TEST(section_sees_whole_node)
{
    setup();
    static const sp_config_section_ops_t ops = {count_items, NULL, NULL};
    size_t items = 0;
    ck_assert_int_eq(sp_config_section(cfg, "servers", &ops, &items), 0);
    load_ok("w.yml", "servers:\n  - {listen: \":80\"}\n  - {listen: \":81\"}\n");
    ck_assert_uint_eq(items, 2);
    put_file("w.yml", "servers: [a]\n");
    put_file("x.yml", "servers: [b, c, d]\n");
    char *err;
    ck_assert_int_eq(sp_config_load(cfg, dir, &err), 0);
    ck_assert_uint_eq(items, 3); /* the later file replaces the list */
    teardown();
}
END_TEST

/* ---- declarations --------------------------------------------------------- */

START_TEST(declaration_table)
{
    setup();
    sp_cvar_t *ka = NULL, *ports = NULL, *ratio = NULL;
    const sp_cvar_decl_t table[] = {
        {"http.keepalive", SP_CVAR_DURATION, "30s", "0", "1h", "keep-alive", &ka},
        {"http.ports", SP_CVAR_LIST, "[80, 443]", NULL, NULL, "ports", &ports},
        {"http.ratio", SP_CVAR_FLOAT, "0.5", "0", "1", NULL, &ratio},
        {"http.name", SP_CVAR_STRING, NULL, NULL, NULL, NULL, NULL},
    };
    char *err;
    ck_assert_int_eq(sp_config_declare(cfg, table, 4, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 30000000);
    ck_assert_uint_eq(sp_cvar_list(ports)->n, 2);
    ck_assert_double_eq(sp_cvar_float(ratio), 0.5);
    ck_assert_str_eq(sp_cvar_string(sp_config_find(cfg, "http.name")), "");
    ck_assert_str_eq(load_fails("t.yml", "http.keepalive: 2h\n"),
                     "t.yml:1:17: http.keepalive: 2h is out of range [0s, 1h]\n");

    const sp_cvar_decl_t bad[] = {
        {"x.ok", SP_CVAR_INT, "1", NULL, NULL, NULL, NULL},
        {"x.bad", SP_CVAR_SIZE, "lots", NULL, NULL, NULL, NULL},
    };
    ck_assert_int_eq(sp_config_declare(cfg, bad, 2, &err), -EINVAL);
    ck_assert_str_eq(err, "x.bad: bad default: expected a size such as 512, 16KiB or 1GB "
                          "(units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got 'lots'\n");
    free(err);
    ck_assert_ptr_null(sp_config_find(cfg, "x.ok")); /* all or none */
    teardown();
}
END_TEST

START_TEST(declaration_errors)
{
    setup();
    ck_assert_ptr_nonnull(sp_config_int(cfg, "a.b", 1, 0, 10, NULL));
    static const char *const bad_names[] = {"", ".a", "a.", "a..b", "a b", "a/b"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(sp_config_int(cfg, bad_names[i], 1, 0, 10, NULL));
        ck_assert_int_eq(errno, EINVAL);
    }
    errno = 0;
    ck_assert_ptr_null(sp_config_int(cfg, "a.b", 1, 0, 10, NULL));
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_ptr_null(sp_config_int(cfg, "a", 1, 0, 10, NULL)); /* prefix of a.b */
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_ptr_null(sp_config_int(cfg, "a.b.c", 1, 0, 10, NULL));
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_ptr_null(sp_config_int(cfg, "A.B", 1, 0, 10, NULL)); /* same env name */
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_ptr_null(sp_config_int(cfg, "c", 11, 0, 10, NULL)); /* default out of range */
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(sp_config_int(cfg, "c", 1, 10, 0, NULL));
    ck_assert_int_eq(errno, EINVAL);
    static const char *const odd[] = {"k", NULL};
    ck_assert_ptr_null(sp_config_map(cfg, "m", odd, NULL));
    ck_assert_int_eq(errno, EINVAL);
    static const char *const twice[] = {"k", "1", "k", "2", NULL};
    ck_assert_ptr_null(sp_config_map(cfg, "m", twice, NULL));
    ck_assert_int_eq(errno, EINVAL);
    teardown();
}
END_TEST

/* ---- print ---------------------------------------------------------------- */

START_TEST(print_config)
{
    setup();
    sp_config_int(cfg, "http.workers", 4, 1, 64, "worker threads");
    sp_config_duration(cfg, "http.keepalive", 30000000, 0, INT64_MAX, NULL);
    sp_config_size(cfg, "http.max_body", 4 << 20, 0, INT64_MAX, NULL);
    sp_config_string(cfg, "name", "a b", NULL);
    static const char *const l[] = {"x", "y z", NULL};
    sp_config_list(cfg, "list", l, NULL);
    load_ok("p.yml", "http:\n  workers: 8\n");
    setenv("SPINDLE_HTTP_MAX_BODY", "1GB", 1);
    char *err;
    ck_assert_int_eq(sp_config_load_env(cfg, &err), 0);
    unsetenv("SPINDLE_HTTP_MAX_BODY");
    ck_assert_int_eq(sp_config_set(cfg, "http.keepalive=90s", &err), 0);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_int_eq(sp_config_print(cfg, out), 0);
    fclose(out);
    char want[1024];
    snprintf(want, sizeof want,
             "http.keepalive: 90s  # cli\n"
             "http.max_body: 1GB  # env SPINDLE_HTTP_MAX_BODY\n"
             "# worker threads (integer)\n"
             "http.workers: 8  # %s/p.yml:2:3\n"
             "list: [x, \"y z\"]  # default\n"
             "name: \"a b\"  # default\n",
             dir);
    ck_assert_str_eq(text, want);

    /* The output reads back as a config file with the same values. */
    sp_config_t *again = sp_config_create();
    sp_cvar_t *ka = sp_config_duration(again, "http.keepalive", 0, 0, INT64_MAX, NULL);
    sp_cvar_t *lst = sp_config_list(again, "list", NULL, NULL);
    sp_config_int(again, "http.workers", 4, 1, 64, NULL);
    sp_config_size(again, "http.max_body", 0, 0, INT64_MAX, NULL);
    sp_config_string(again, "name", "", NULL);
    ck_assert_int_eq(sp_config_load_string(again, "printed", text, len, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 90000000);
    ck_assert_str_eq(sp_cvar_list(lst)->items[1], "y z");
    sp_config_destroy(again);
    free(text);
    teardown();
}
END_TEST

/* ---- readers racing reloads ----------------------------------------------- */

static _Atomic int stop_readers;

static void *reader(void *arg)
{
    const sp_cvar_t *s = arg;
    unsigned long n = 0;
    while (!atomic_load(&stop_readers)) {
        const char *v = sp_cvar_string(s);
        ck_assert(strcmp(v, "alpha-long-value") == 0 || strcmp(v, "beta") == 0 ||
                  strcmp(v, "init") == 0);
        n++;
    }
    return (void *)n;
}

START_TEST(reads_during_reloads)
{
    setup();
    sp_cvar_t *s = sp_config_string(cfg, "s", "init", NULL);
    pthread_t th[3];
    atomic_store(&stop_readers, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader, s), 0);
    for (int i = 0; i < 500; i++) {
        const char *y = i % 2 ? "s: alpha-long-value\n" : "s: beta\n";
        char *err;
        ck_assert_int_eq(sp_config_load_string(cfg, "mem", y, strlen(y), &err), 0);
    }
    atomic_store(&stop_readers, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_reload");
    SP_TEST_CASE(s, "config_reload", 0, NULL, NULL, listeners_on_reload, custom_check,
                 sections_check_apply_discard, section_error_discards_other_sections,
                 section_sees_whole_node, declaration_table, declaration_errors,
                 print_config, reads_during_reloads);
    return sp_test_run(s);
}
