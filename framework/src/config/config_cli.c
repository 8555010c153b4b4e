/* Loads from the environment and the command line: each is a transaction
 * over its own source (see config_load.c), so precedence holds whatever
 * order the loads come in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

int sp_config_load_env(sp_config_t *cfg, char **errors)
{
    sp__txn_t t;
    int rc = sp__txn_open(&t, &cfg, SRC_ENV, true, errors);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < cfg->nvars; i++) {
        const sp_cvar_t *v = cfg->vars[i];
        const char *text = getenv(v->env);
        char where[300];
        snprintf(where, sizeof where, "env %s", v->env);
        if (text)
            sp__stage_text(&t, i, text, where, where);
    }
    return sp__txn_finish(&t, 0, errors);
}

/* One "key=value" into the transaction. */
static void stage_setting(sp__txn_t *t, const char *setting)
{
    const char *eq = strchr(setting, '=');
    char what[300];
    snprintf(what, sizeof what, "-s %s", setting);
    if (!eq || eq == setting) {
        sp__report(&t->report, what, "expected key=value");
        return;
    }
    char *key = strndup(setting, (size_t)(eq - setting));
    if (!key) {
        t->report.oom = true;
        return;
    }
    long i = sp__config_index(t->cfg, key);
    const sp__csection_t *sec;
    if (i >= 0)
        sp__stage_text(t, (size_t)i, eq + 1, "cli", what);
    else if ((sec = sp__config_section_of(t->cfg, key)))
        sp__report(&t->report, what, "'%s' is in section '%s', which only files can set",
                   key, sec->prefix);
    else
        sp__report(&t->report, what, "unknown key '%s'", key);
    free(key);
}

int sp_config_set(sp_config_t *cfg, const char *setting, char **errors)
{
    sp__txn_t t;
    int rc = sp__txn_open(&t, &cfg, SRC_CLI, false, errors);
    if (rc < 0)
        return rc;
    if (setting)
        stage_setting(&t, setting);
    else
        sp__report(&t.report, NULL, "no setting");
    return sp__txn_finish(&t, 0, errors);
}

int sp_config_clear_cli(sp_config_t *cfg)
{
    sp__txn_t t;
    int rc = sp__txn_open(&t, &cfg, SRC_CLI, true, NULL);
    return rc < 0 ? rc : sp__txn_finish(&t, 0, NULL);
}

/* The setting an argv entry carries: "-s X" / "--set X" take the next one
 * (*used = 2), "-sX" / "--set=X" carry it (*used = 1); NULL otherwise. */
static const char *setting_arg(char **argv, int i, int argc, int *used)
{
    const char *a = argv[i];
    *used = 1;
    if (strcmp(a, "-s") == 0 || strcmp(a, "--set") == 0) {
        *used = 2;
        return i + 1 < argc ? argv[i + 1] : "";
    }
    if (strncmp(a, "--set=", 6) == 0)
        return a + 6;
    if (strncmp(a, "-s", 2) == 0)
        return a + 2;
    return NULL;
}

int sp_config_args(sp_config_t *cfg, int *argc, char **argv, char **errors)
{
    sp__txn_t t;
    if (errors)
        *errors = NULL;
    if (!argc || !argv)
        return -EINVAL;
    int rc = sp__txn_open(&t, &cfg, SRC_CLI, false, errors);
    if (rc < 0)
        return rc;
    int used;
    for (int i = 1; i < *argc && strcmp(argv[i], "--") != 0; i += used) {
        const char *s = setting_arg(argv, i, *argc, &used);
        if (s)
            stage_setting(&t, s);
    }
    rc = sp__txn_finish(&t, 0, errors);
    if (rc < 0)
        return rc;
    /* Keep everything that is not a setting, and all from "--" on. */
    int out = 1;
    bool past = false;
    for (int i = 1; i < *argc; i += used) {
        used = 1;
        past = past || strcmp(argv[i], "--") == 0;
        if (past || !setting_arg(argv, i, *argc, &used))
            argv[out++] = argv[i];
    }
    if (out < *argc)
        argv[out] = NULL;
    *argc = out;
    return 0;
}
