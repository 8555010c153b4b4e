/* The config tests' shared fixture (tests/config/test_config_*.c): a fresh
 * configuration and a temporary directory for its files. */
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

char dir[64];
sp_config_t *cfg;

void setup(void)
{
    strcpy(dir, "/tmp/sp_config_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cfg = sp_config_create();
    ck_assert_ptr_nonnull(cfg);
}

void teardown(void)
{
    sp_config_destroy(cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write `text` to dir/name; returns the path (static buffer). */
const char *put_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Load `text` as dir/name, expect failure, return the error text (static),
 * with the directory prefix removed so expectations stay short. */
const char *load_fails(const char *name, const char *text)
{
    static char out[4096];
    char *err = NULL;
    ck_assert_int_eq(sp_config_load(cfg, put_file(name, text), &err), -EINVAL);
    ck_assert_ptr_nonnull(err);
    size_t dl = strlen(dir) + 1;
    char *o = out;
    for (char *p = err; *p;) {
        if (strncmp(p, dir, dl - 1) == 0 && p[dl - 1] == '/')
            p += dl;
        else
            *o++ = *p++;
    }
    *o = '\0';
    free(err);
    return out;
}

void load_ok(const char *name, const char *text)
{
    char *err = NULL;
    int rc = sp_config_load(cfg, put_file(name, text), &err);
    ck_assert_msg(rc == 0, "load failed (%d): %s", rc, err ? err : "");
    ck_assert_ptr_null(err);
}
