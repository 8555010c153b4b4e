/* Configuration, loading: every type, value syntax, exact error locations,
 * precedence (file < env < cli), argv, unknown keys and open prefixes,
 * directories, and alias bombs refused. */
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

/* ---- every type ---------------------------------------------------------- */

START_TEST(every_type_from_yaml)
{
    setup();
    static const char *const ports[] = {"80", NULL};
    static const char *const hdrs[] = {"server", "spindle", NULL};
    sp_cvar_t *workers = sp_config_int(cfg, "http.workers", 4, 1, 1024, "worker threads");
    sp_cvar_t *ratio = sp_config_float(cfg, "http.ratio", 0.5, 0, 1, NULL);
    sp_cvar_t *gzip = sp_config_bool(cfg, "http.gzip", false, NULL);
    sp_cvar_t *name = sp_config_string(cfg, "server.name", "x", NULL);
    sp_cvar_t *ka = sp_config_duration(cfg, "http.keepalive_timeout", 30000000, 0,
                                       INT64_MAX, NULL);
    sp_cvar_t *body = sp_config_size(cfg, "http.max_body", 1 << 20, 0, INT64_MAX, NULL);
    sp_cvar_t *list = sp_config_list(cfg, "http.ports", ports, NULL);
    sp_cvar_t *map = sp_config_map(cfg, "http.headers", hdrs, NULL);
    const sp_cvar_t *all[] = {workers, ratio, gzip, name, ka, body, list, map};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ck_assert_ptr_nonnull(all[i]);

    /* Defaults first. */
    ck_assert_int_eq(sp_cvar_int(workers), 4);
    ck_assert_str_eq(sp_cvar_string(name), "x");
    ck_assert_uint_eq(sp_cvar_list(list)->n, 1);
    ck_assert_str_eq(sp_strmap_get(sp_cvar_map(map), "server"), "spindle");
    ck_assert_str_eq(sp_cvar_source(workers), "default");

    load_ok("a.yml", "http:\n"
                     "  workers: 16\n"
                     "  ratio: 0.25\n"
                     "  gzip: yes\n"
                     "  keepalive_timeout: 1.5s\n"
                     "  max_body: 16KiB\n"
                     "  ports: [8080, 8443]\n"
                     "  headers:\n"
                     "    x-a: one\n"
                     "    x-b: \"two words\"\n"
                     "server.name: \"hello: world\"\n");
    ck_assert_int_eq(sp_cvar_int(workers), 16);
    ck_assert_double_eq(sp_cvar_float(ratio), 0.25);
    ck_assert(sp_cvar_bool(gzip));
    ck_assert_str_eq(sp_cvar_string(name), "hello: world");
    ck_assert_int_eq(sp_cvar_duration(ka), 1500000);
    ck_assert_int_eq(sp_cvar_size(body), 16384);
    ck_assert_int_eq(sp_cvar_int(body), 16384); /* int-like getters agree */
    const sp_strlist_t *l = sp_cvar_list(list);
    ck_assert_uint_eq(l->n, 2);
    ck_assert_str_eq(l->items[0], "8080");
    ck_assert_str_eq(l->items[1], "8443");
    const sp_strmap_t *m = sp_cvar_map(map);
    ck_assert_uint_eq(m->n, 2);
    ck_assert_str_eq(m->keys[0], "x-a");
    ck_assert_str_eq(sp_strmap_get(m, "x-b"), "two words");
    ck_assert_ptr_null(sp_strmap_get(m, "server"));
    /* Type mismatches read as zero. */
    ck_assert_ptr_null(sp_cvar_string(workers));
    ck_assert_int_eq(sp_cvar_int(name), 0);

    char where[300];
    snprintf(where, sizeof where, "%s/a.yml:2:3", dir);
    ck_assert_str_eq(sp_cvar_source(workers), where);
    teardown();
}
END_TEST

typedef struct unit_case {
    const char *text;
    int rc;
    int64_t value;
} unit_case_t;

static void check_units(int (*parse)(const char *, int64_t *), const unit_case_t *c,
                        size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        int rc = parse(c[i].text, &v);
        ck_assert_msg(rc == c[i].rc, "'%s': rc %d", c[i].text, rc);
        if (rc == 0)
            ck_assert_msg(v == c[i].value, "'%s' = %lld", c[i].text, (long long)v);
    }
}

START_TEST(duration_syntax)
{
    static const unit_case_t cases[] = {
        {"30s", 0, 30000000},      {"250ms", 0, 250000},  {"1m", 0, 60000000},
        {"2h", 0, 7200000000LL},   {"1.5s", 0, 1500000},  {"1h30m", 0, 5400000000LL},
        {"0", 0, 0},               {"-1s", 0, -1000000},  {"1d", 0, 86400000000LL},
        {"10us", 0, 10},           {"0.5ms", 0, 500},     {" 2 s ", 0, 2000000},
        {"5", -EINVAL, 0},         {"s", -EINVAL, 0},     {"1x", -EINVAL, 0},
        {"", -EINVAL, 0},          {"1.s", 0, 1000000},   {"1sec", -EINVAL, 0},
        {"0.1s", 0, 100000},       {"99999999999999999999s", -ERANGE, 0},
        {"200000000d", -ERANGE, 0},
    };
    check_units(sp_parse_duration, cases, sizeof cases / sizeof cases[0]);
}
END_TEST

START_TEST(size_syntax)
{
    static const unit_case_t cases[] = {
        {"512", 0, 512},         {"16KiB", 0, 16384},          {"4MiB", 0, 4 << 20},
        {"1GB", 0, 1000000000},  {"1gib", 0, 1 << 30},         {"2 KB", 0, 2000},
        {"1.5KiB", 0, 1536},     {"10B", 0, 10},               {"1TiB", 0, 1LL << 40},
        {"1 k", -EINVAL, 0},     {"1KiB2", -EINVAL, 0},        {"MiB", -EINVAL, 0},
        {"1MiB1KiB", -EINVAL, 0}, {"9999999TiB", -ERANGE, 0},
    };
    check_units(sp_parse_size, cases, sizeof cases / sizeof cases[0]);
}
END_TEST

START_TEST(null_means_not_set)
{
    setup();
    sp_cvar_t *s = sp_config_string(cfg, "a.s", "def", NULL);
    sp_cvar_t *t = sp_config_string(cfg, "a.t", "def", NULL);
    load_ok("n.yml", "a:\n  s: ~\n  t: \"\"\n");
    ck_assert_str_eq(sp_cvar_string(s), "def");
    ck_assert_str_eq(sp_cvar_string(t), "");
    teardown();
}
END_TEST

/* ---- errors with exact locations --------------------------------------- */

/* Each case loads `yaml` as f.yml and expects exactly `errors`. */
typedef struct err_case {
    const char *yaml, *errors;
} err_case_t;

static void expect_errors(const err_case_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(load_fails("f.yml", c[i].yaml), c[i].errors);
}

START_TEST(errors_name_file_line_column)
{
    setup();
    sp_config_int(cfg, "http.workers", 4, 1, 1024, NULL);
    sp_config_duration(cfg, "http.timeout", 1000000, 0, 3600000000LL, NULL);
    sp_config_list(cfg, "http.ports", NULL, NULL);
    sp_config_bool(cfg, "http.gzip", false, NULL);
    static const err_case_t cases[] = {
        {"http:\n  workers: many\n",
         "f.yml:2:12: http.workers: expected an integer, got 'many'\n"},
        {"http:\n  workers: 0\n", "f.yml:2:12: http.workers: 0 is out of range [1, 1024]\n"},
        {"http.timeout: 2h\n", "f.yml:1:15: http.timeout: 2h is out of range [0s, 1h]\n"},
        {"http:\n  workers: 2\n  wrokers: 3\n", "f.yml:3:3: unknown key 'http.wrokers'\n"},
        {"http:\n  workers: [1, 2]\n",
         "f.yml:2:12: http.workers: expected an integer, got a list\n"},
        {"http.ports: [80, {a: 1}]\n", "f.yml:1:18: http.ports: list items must be scalars\n"},
        {"http:\n  workers: 2\nhttp.workers: 3\n",
         "f.yml:3:1: http.workers is set twice (first at line 2)\n"},
        {"http: 5\n", "f.yml:1:7: http: expected a mapping\n"},
        {"- a\n- b\n", "f.yml:1:1: the top level must be a mapping\n"},
        /* Every problem of a load is reported, not just the first. */
        {"http:\n  workers: x\n  gzip: maybe\nnope: 1\n",
         "f.yml:2:12: http.workers: expected an integer, got 'x'\n"
         "f.yml:3:9: http.gzip: expected a boolean (true/false, yes/no, on/off, 1/0), "
         "got 'maybe'\n"
         "f.yml:4:1: unknown key 'nope'\n"},
    };
    expect_errors(cases, sizeof cases / sizeof cases[0]);
    teardown();
}
END_TEST

START_TEST(malformed_yaml)
{
    setup();
    sp_config_int(cfg, "a", 1, 0, 10, NULL);
    static const err_case_t cases[] = {
        {"a: 1\n b: 2\n", "f.yml:2:3: mapping values are not allowed in this context\n"},
        {"a: [1, 2\n", "f.yml:2:1: did not find expected ',' or ']' (while parsing a flow "
                       "sequence at 1:4)\n"},
        {"a:\n\t- 1\n", "f.yml:2:1: found character that cannot start any token (while "
                         "scanning for the next token at 2:1)\n"},
        {"a: 1\n---\na: 2\n", "f.yml:3:1: only one YAML document per file\n"},
        {"a: \xff\n", "f.yml:1:4: invalid leading UTF-8 octet\n"},
        {"? [a]\n: 1\n", "f.yml:1:3: mapping keys must be scalars\n"},
        {"a: 1\nb: 2\na: 3\n", "f.yml:3:1: duplicate key 'a' (also at line 1)\n"},
    };
    expect_errors(cases, sizeof cases / sizeof cases[0]);
    teardown();
}
END_TEST

START_TEST(missing_file)
{
    setup();
    char *err = NULL;
    char path[300];
    snprintf(path, sizeof path, "%s/none.yml", dir);
    ck_assert_int_eq(sp_config_load(cfg, path, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "none.yml: cannot read: No such file"));
    free(err);
    teardown();
}
END_TEST

/* ---- precedence ---------------------------------------------------------- */

START_TEST(precedence_file_env_cli)
{
    setup();
    sp_cvar_t *ka = sp_config_duration(cfg, "http.keepalive_timeout", 30000000, 0,
                                       INT64_MAX, NULL);
    sp_cvar_t *w = sp_config_int(cfg, "http.workers", 4, 1, 64, NULL);
    ck_assert_str_eq(sp_cvar_env_name(ka), "SPINDLE_HTTP_KEEPALIVE_TIMEOUT");

    const char *path = put_file("p.yml", "http: {keepalive_timeout: 10s, workers: 8}\n");
    char *err;
    ck_assert_int_eq(sp_config_load(cfg, path, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 10000000);

    setenv("SPINDLE_HTTP_KEEPALIVE_TIMEOUT", "5s", 1);
    ck_assert_int_eq(sp_config_load_env(cfg, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 5000000);
    ck_assert_str_eq(sp_cvar_source(ka), "env SPINDLE_HTTP_KEEPALIVE_TIMEOUT");
    ck_assert_int_eq(sp_cvar_int(w), 8); /* no env: the file still counts */

    ck_assert_int_eq(sp_config_set(cfg, "http.keepalive_timeout=250ms", &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 250000);
    ck_assert_str_eq(sp_cvar_source(ka), "cli");

    /* A reload of the file changes neither env nor cli values... */
    path = put_file("p.yml", "http: {keepalive_timeout: 20s, workers: 9}\n");
    ck_assert_int_eq(sp_config_load(cfg, path, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 250000);
    ck_assert_int_eq(sp_cvar_int(w), 9);
    /* ... and when the cli value goes, env wins again, then the file. */
    ck_assert_int_eq(sp_config_clear_cli(cfg), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 5000000);
    unsetenv("SPINDLE_HTTP_KEEPALIVE_TIMEOUT");
    ck_assert_int_eq(sp_config_load_env(cfg, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 20000000);
    /* A key removed from the file goes back to its default. */
    path = put_file("p.yml", "http: {workers: 9}\n");
    ck_assert_int_eq(sp_config_load(cfg, path, &err), 0);
    ck_assert_int_eq(sp_cvar_duration(ka), 30000000);
    ck_assert_str_eq(sp_cvar_source(ka), "default");
    teardown();
}
END_TEST

START_TEST(env_and_cli_errors)
{
    setup();
    sp_cvar_t *w = sp_config_int(cfg, "http.workers", 4, 1, 64, NULL);
    sp_cvar_t *l = sp_config_list(cfg, "http.ports", NULL, NULL);
    sp_cvar_t *m = sp_config_map(cfg, "http.headers", NULL, NULL);
    sp_config_section(cfg, "servers", NULL, NULL);
    char *err;
    setenv("SPINDLE_HTTP_WORKERS", "lots", 1);
    ck_assert_int_eq(sp_config_load_env(cfg, &err), -EINVAL);
    ck_assert_str_eq(err, "env SPINDLE_HTTP_WORKERS: http.workers: expected an integer, "
                          "got 'lots'\n");
    free(err);
    unsetenv("SPINDLE_HTTP_WORKERS");
    ck_assert_int_eq(sp_config_set(cfg, "http.workers=100", &err), -EINVAL);
    ck_assert_str_eq(err, "-s http.workers=100: http.workers: 100 is out of range [1, 64]\n");
    free(err);
    ck_assert_int_eq(sp_config_set(cfg, "http.wrk=1", &err), -EINVAL);
    ck_assert_str_eq(err, "-s http.wrk=1: unknown key 'http.wrk'\n");
    free(err);
    ck_assert_int_eq(sp_config_set(cfg, "servers.a=1", &err), -EINVAL);
    ck_assert_str_eq(err, "-s servers.a=1: 'servers.a' is in section 'servers', which "
                          "only files can set\n");
    free(err);
    ck_assert_int_eq(sp_config_set(cfg, "novalue", &err), -EINVAL);
    ck_assert_str_eq(err, "-s novalue: expected key=value\n");
    free(err);
    ck_assert_int_eq(sp_cvar_int(w), 4);

    /* Lists and maps from text: YAML flow syntax, or commas for lists. */
    ck_assert_int_eq(sp_config_set(cfg, "http.ports=80, 443 ,8080", &err), 0);
    ck_assert_uint_eq(sp_cvar_list(l)->n, 3);
    ck_assert_str_eq(sp_cvar_list(l)->items[1], "443");
    ck_assert_int_eq(sp_config_set(cfg, "http.ports=[\"a,b\", c]", &err), 0);
    ck_assert_uint_eq(sp_cvar_list(l)->n, 2);
    ck_assert_str_eq(sp_cvar_list(l)->items[0], "a,b");
    setenv("SPINDLE_HTTP_HEADERS", "{x: 1, y: two}", 1);
    ck_assert_int_eq(sp_config_load_env(cfg, &err), 0);
    ck_assert_str_eq(sp_strmap_get(sp_cvar_map(m), "y"), "two");
    setenv("SPINDLE_HTTP_HEADERS", "x=1", 1);
    ck_assert_int_eq(sp_config_load_env(cfg, &err), -EINVAL);
    ck_assert_str_eq(err, "env SPINDLE_HTTP_HEADERS: http.headers: expected a mapping such "
                          "as {key: value}, got 'x=1'\n");
    free(err);
    unsetenv("SPINDLE_HTTP_HEADERS");
    teardown();
}
END_TEST

START_TEST(argv_settings)
{
    setup();
    sp_cvar_t *a = sp_config_int(cfg, "a", 0, 0, 100, NULL);
    sp_cvar_t *b = sp_config_string(cfg, "b.c", "", NULL);
    sp_cvar_t *d = sp_config_bool(cfg, "d", false, NULL);
    char *argv[] = {"prog", "-s", "a=5", "-f", "x", "-sb.c=hi there", "--set", "d=on",
                    "--", "-s", "a=7", NULL};
    int argc = 11;
    char *err;
    ck_assert_int_eq(sp_config_args(cfg, &argc, argv, &err), 0);
    ck_assert_int_eq(sp_cvar_int(a), 5);
    ck_assert_str_eq(sp_cvar_string(b), "hi there");
    ck_assert(sp_cvar_bool(d));
    ck_assert_int_eq(argc, 6);
    const char *want[] = {"prog", "-f", "x", "--", "-s", "a=7"};
    for (int i = 0; i < argc; i++)
        ck_assert_str_eq(argv[i], want[i]);
    ck_assert_ptr_null(argv[argc]);

    /* All or none. */
    char *bad[] = {"prog", "-s", "a=9", "-s", "a=1000", NULL};
    argc = 5;
    ck_assert_int_eq(sp_config_args(cfg, &argc, bad, &err), -EINVAL);
    ck_assert_str_eq(err, "-s a=1000: a: 1000 is out of range [0, 100]\n");
    free(err);
    ck_assert_int_eq(argc, 5);
    ck_assert_int_eq(sp_cvar_int(a), 5);
    teardown();
}
END_TEST

/* ---- unknown keys, open prefixes, map variables ------------------------- */

START_TEST(open_prefix_and_map_variables)
{
    setup();
    sp_cvar_t *m = sp_config_map(cfg, "http.mime", NULL, NULL);
    ck_assert_int_eq(sp_config_section(cfg, "servers", NULL, NULL), 0);
    load_ok("o.yml", "servers:\n  main: {listen: [\":80\"]}\n  admin: 1\n"
                     "servers.extra.x: 1\n"
                     "http:\n  mime:\n    html: text/html\n    css: text/css\n");
    ck_assert_uint_eq(sp_cvar_map(m)->n, 2);
    ck_assert_str_eq(sp_strmap_get(sp_cvar_map(m), "css"), "text/css");
    ck_assert_str_eq(load_fails("x.yml", "server:\n  main: 1\n"),
                     "x.yml:1:1: unknown key 'server'\n");
    ck_assert_str_eq(load_fails("y.yml", "http:\n  mime:\n    html: {a: b}\n"),
                     "y.yml:3:11: http.mime: map values must be scalars\n");
    teardown();
}
END_TEST

/* ---- directories ----------------------------------------------------------- */

START_TEST(directory_of_yml_files)
{
    setup();
    sp_cvar_t *a = sp_config_int(cfg, "a", 0, 0, 100, NULL);
    sp_cvar_t *b = sp_config_int(cfg, "b", 0, 0, 100, NULL);
    sp_cvar_t *c = sp_config_int(cfg, "c", 0, 0, 100, NULL);
    put_file("20-local.yml", "a: 2\nb: 20\n");
    put_file("10-base.yml", "a: 1\nb: 10\nc: 1\n");
    put_file("30-last.yaml", "b: 30\n");
    put_file("ignored.txt", "a: junk\n");
    put_file(".hidden.yml", "a: junk\n");
    char *err;
    ck_assert_int_eq(sp_config_load(cfg, dir, &err), 0);
    ck_assert_int_eq(sp_cvar_int(a), 2);
    ck_assert_int_eq(sp_cvar_int(b), 30);
    ck_assert_int_eq(sp_cvar_int(c), 1);
    char where[300];
    snprintf(where, sizeof where, "%s/30-last.yaml:1:1", dir);
    ck_assert_str_eq(sp_cvar_source(b), where);

    /* An error in any file: nothing changes, and the file is named. */
    put_file("15-bad.yml", "c: 500\n");
    ck_assert_int_eq(sp_config_load(cfg, dir, &err), -EINVAL);
    char want[400];
    snprintf(want, sizeof want, "%s/15-bad.yml:1:4: c: 500 is out of range [0, 100]\n", dir);
    ck_assert_str_eq(err, want);
    free(err);
    ck_assert_int_eq(sp_cvar_int(c), 1);
    teardown();
}
END_TEST

/* 10^7 nodes once aliases are expanded. */
static const char bomb[] = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                           "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                           "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                           "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                           "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                           "x: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";

START_TEST(alias_bomb_is_refused)
{
    setup();
    sp_config_section(cfg, "x", NULL, NULL);
    char *err = NULL;
    ck_assert_int_eq(sp_config_load_string(cfg, "bomb", bomb, strlen(bomb), &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "too many nodes"));
    free(err);
    teardown();
}
END_TEST

/* The node budget is per file: a bomb in a directory is reported in its
 * own file, and the files after it are read as usual. */
START_TEST(alias_bomb_in_directory_names_its_file)
{
    setup();
    sp_config_section(cfg, "x", NULL, NULL);
    sp_config_int(cfg, "y", 0, 0, 100, NULL);
    put_file("10-bomb.yml", bomb);
    put_file("20-ok.yml", "y: 1\n");
    put_file("30-bad.yml", "y: 500\n");
    char *err = NULL;
    ck_assert_int_eq(sp_config_load(cfg, dir, &err), -EINVAL);
    char want[300];
    snprintf(want, sizeof want, "%s/10-bomb.yml:", dir);
    ck_assert_msg(strstr(err, want) && strstr(err, "too many nodes"), "got: %s", err);
    snprintf(want, sizeof want, "%s/30-bad.yml:1:4: y: 500 is out of range", dir);
    ck_assert_msg(strstr(err, want), "got: %s", err);
    ck_assert_msg(!strstr(err, "20-ok.yml"), "got: %s", err);
    free(err);
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_load");
    SP_TEST_CASE(s, "config_load", 0, NULL, NULL, every_type_from_yaml, duration_syntax,
                 size_syntax, null_means_not_set, errors_name_file_line_column,
                 malformed_yaml, missing_file, precedence_file_env_cli, env_and_cli_errors,
                 argv_settings, open_prefix_and_map_variables, directory_of_yml_files,
                 alias_bomb_is_refused, alias_bomb_in_directory_names_its_file);
    return sp_test_run(s);
}
