/* Logging from the configuration: the variables log.level, log.pattern and
 * log.queue_size, and the section "log" with appenders, root and loggers:
 *
 *   log:
 *     level: info
 *     appenders:
 *       console: {type: stderr}
 *       access_file: {type: file, path: /var/log/app/access.log, pattern: "%m%n"}
 *     root: [console]
 *     loggers:
 *       http: debug
 *       http.access: {level: info, appenders: [access_file]}
 *
 * check() builds everything (and opens the files) so that a bad path is a
 * configuration error with its location; apply() only swaps it in. A
 * logger configured by the previous load but not by this one goes back to
 * inheriting. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_internal.h"

typedef struct idx_list {
    size_t *idx;
    size_t n;
    bool set;
} idx_list_t;

typedef struct staged_logger {
    char *name;
    int level;        /* SP_LEVEL_INHERIT when not given */
    idx_list_t apps;  /* indexes into setup_t.apps */
} staged_logger_t;

typedef struct setup {
    sp_log_appender_t **apps;
    const char **names; /* node text: valid during check only */
    size_t napps;
    idx_list_t root;
    staged_logger_t *loggers;
    size_t nloggers;
} setup_t;

/* Names of the loggers the last applied setup configured (config lock). */
static char **configured;
static size_t nconfigured;
static bool in_use;

/* ---- helpers -------------------------------------------------------------- */

static void setup_free(setup_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->napps; i++)
        sp_log_appender_release(s->apps[i]);
    for (size_t i = 0; i < s->nloggers; i++) {
        free(s->loggers[i].name);
        free(s->loggers[i].apps.idx);
    }
    free(s->apps);
    free(s->names);
    free(s->root.idx);
    free(s->loggers);
    free(s);
}

static bool want_map(const sp_cnode_t *n, const char *what, sp_config_report_t *r)
{
    if (sp_cnode_kind(n) == SP_CNODE_MAP)
        return true;
    sp_config_error(r, n, "%s: expected a mapping", what);
    return false;
}

/* Reject keys of map `n` not in the NULL-terminated `known`. */
static bool known_keys(const sp_cnode_t *n, const char *what, const char *const *known,
                       sp_config_report_t *r)
{
    bool ok = true;
    for (size_t i = 0; i < sp_cnode_len(n); i++) {
        const char *k = sp_cnode_key(n, i);
        size_t j = 0;
        while (known[j] && strcmp(known[j], k) != 0)
            j++;
        if (!known[j]) {
            sp_config_error(r, sp_cnode_key_node(n, i), "unknown key '%s.%s'", what, k);
            ok = false;
        }
    }
    return ok;
}

static const char *scalar(const sp_cnode_t *n, const char *what, sp_config_report_t *r)
{
    const char *t = n ? sp_cnode_text(n) : NULL;
    if (n && !t)
        sp_config_error(r, n, "%s: expected a scalar", what);
    return t;
}

/* ---- appenders ------------------------------------------------------------ */

static sp_log_appender_t *make_appender(const sp_cnode_t *n, const char *what,
                                        sp_config_report_t *r)
{
    static const char *const keys[] = {"type", "path", "pattern", NULL};
    if (!want_map(n, what, r) || !known_keys(n, what, keys, r))
        return NULL;
    const sp_cnode_t *tn = sp_cnode_get(n, "type"), *pn = sp_cnode_get(n, "path");
    const sp_cnode_t *patn = sp_cnode_get(n, "pattern");
    const char *type = scalar(tn, what, r), *path = scalar(pn, what, r);
    const char *pattern = scalar(patn, what, r);
    if ((tn && !type) || (pn && !path) || (patn && !pattern))
        return NULL; /* reported */
    char msg[256];
    sp__log_pattern_t *check = pattern ? sp__pattern_compile(pattern, msg, sizeof msg) : NULL;
    if (pattern && !check) {
        sp_config_error(r, patn, "%s: %s", what, msg);
        return NULL;
    }
    sp__pattern_free(check);
    bool file = type && strcmp(type, "file") == 0;
    if (!type || (!file && strcmp(type, "stdout") != 0 && strcmp(type, "stderr") != 0)) {
        sp_config_error(r, n, "%s: type must be stdout, stderr or file", what);
        return NULL;
    }
    if (file != (path != NULL)) {
        sp_config_error(r, pn ? pn : n, "%s: %s", what,
                        file ? "a file appender needs a path" : "only a file appender has a path");
        return NULL;
    }
    sp_log_appender_t *a = file                          ? sp_log_file(path, pattern)
                           : strcmp(type, "stdout") == 0 ? sp_log_stdout(pattern)
                                                         : sp_log_stderr(pattern);
    if (!a)
        sp_config_error(r, pn ? pn : n, "%s: cannot open '%s': %s", what, path ? path : type,
                        strerror(errno));
    return a;
}

static int check_appenders(setup_t *s, const sp_cnode_t *n, sp_config_report_t *r)
{
    if (!n)
        return 0;
    if (!want_map(n, "log.appenders", r))
        return -1;
    size_t cap = sp_cnode_len(n);
    s->apps = calloc(cap + 1, sizeof *s->apps);
    s->names = calloc(cap + 1, sizeof *s->names);
    if (!s->apps || !s->names)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < cap; i++) {
        char what[300];
        snprintf(what, sizeof what, "log.appenders.%s", sp_cnode_key(n, i));
        sp_log_appender_t *a = make_appender(sp_cnode_item(n, i), what, r);
        if (!a) {
            rc = -1;
            continue;
        }
        s->names[s->napps] = sp_cnode_key(n, i);
        s->apps[s->napps++] = a;
    }
    return rc;
}

/* A list of appender names (a single name is fine too) as indexes. */
static int resolve(const setup_t *s, const sp_cnode_t *n, const char *what, idx_list_t *out,
                   sp_config_report_t *r)
{
    if (!n)
        return 0;
    bool one = sp_cnode_kind(n) == SP_CNODE_SCALAR;
    size_t count = one ? 1 : sp_cnode_len(n);
    if (sp_cnode_kind(n) == SP_CNODE_MAP) {
        sp_config_error(r, n, "%s: expected a list of appender names", what);
        return -1;
    }
    out->idx = malloc((count + 1) * sizeof *out->idx);
    if (!out->idx)
        return -ENOMEM;
    out->set = true;
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        const sp_cnode_t *item = one ? n : sp_cnode_item(n, i);
        const char *name = scalar(item, what, r);
        size_t j = 0;
        while (name && j < s->napps && strcmp(s->names[j], name) != 0)
            j++;
        if (name && j == s->napps)
            sp_config_error(r, item, "%s: no appender named '%s'", what, name);
        if (!name || j == s->napps)
            rc = -1;
        else
            out->idx[out->n++] = j;
    }
    return rc;
}

/* ---- loggers -------------------------------------------------------------- */

static int parse_level(const sp_cnode_t *n, const char *what, int *level,
                       sp_config_report_t *r)
{
    const char *t = scalar(n, what, r);
    sp_log_level_t l;
    if (!t)
        return -1;
    if (sp_log_level_parse(t, &l) < 0) {
        sp_config_error(r, n, "%s: unknown level '%s' (trace, debug, info, warn, error, "
                              "fatal, off)", what, t);
        return -1;
    }
    *level = (int)l;
    return 0;
}

static int check_logger(setup_t *s, const char *name, const sp_cnode_t *n,
                        sp_config_report_t *r)
{
    static const char *const keys[] = {"level", "appenders", NULL};
    char what[300];
    snprintf(what, sizeof what, "log.loggers.%s", name);
    staged_logger_t *l = &s->loggers[s->nloggers];
    l->level = SP_LEVEL_INHERIT;
    if (!(l->name = strdup(name)))
        return -ENOMEM;
    s->nloggers++;
    if (!*name || name[0] == '.' || name[strlen(name) - 1] == '.' || strstr(name, "..") ||
        strcmp(name, "root") == 0) {
        sp_config_error(r, n, "%s: bad logger name (use log.level and log.root for the root)",
                        what);
        return -1;
    }
    if (sp_cnode_kind(n) == SP_CNODE_SCALAR) /* "http: debug" */
        return parse_level(n, what, &l->level, r);
    if (!want_map(n, what, r) || !known_keys(n, what, keys, r))
        return -1;
    const sp_cnode_t *lv = sp_cnode_get(n, "level");
    int rc = lv ? parse_level(lv, what, &l->level, r) : 0;
    int rc2 = resolve(s, sp_cnode_get(n, "appenders"), what, &l->apps, r);
    return rc < 0 ? rc : rc2;
}

static int check_loggers(setup_t *s, const sp_cnode_t *n, sp_config_report_t *r)
{
    if (!n)
        return 0;
    if (!want_map(n, "log.loggers", r))
        return -1;
    s->loggers = calloc(sp_cnode_len(n) + 1, sizeof *s->loggers);
    if (!s->loggers)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < sp_cnode_len(n); i++) {
        int one = check_logger(s, sp_cnode_key(n, i), sp_cnode_item(n, i), r);
        rc = rc < 0 ? rc : one;
    }
    return rc;
}

/* ---- the section ----------------------------------------------------------- */

static int log_check(const sp_cnode_t *node, sp_config_report_t *r, void **staged,
                     void *arg)
{
    static const char *const keys[] = {"appenders", "root", "loggers", NULL};
    (void)arg;
    setup_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int rc = node && (!want_map(node, "log", r) || !known_keys(node, "log", keys, r)) ? -1 : 0;
    if (rc == 0)
        rc = check_appenders(s, sp_cnode_get(node, "appenders"), r);
    if (rc == 0)
        rc = resolve(s, sp_cnode_get(node, "root"), "log.root", &s->root, r);
    if (rc == 0)
        rc = check_loggers(s, sp_cnode_get(node, "loggers"), r);
    if (rc < 0) {
        setup_free(s);
        if (rc != -1)
            sp_config_error(r, node, "log: %s", strerror(-rc));
        return -1;
    }
    free(s->names); /* node text dies with the load */
    s->names = NULL;
    *staged = s;
    return 0;
}

static void set_apps(sp_logger_t *lg, const setup_t *s, const idx_list_t *l)
{
    sp_log_appender_t **apps = malloc((l->n + 1) * sizeof *apps);
    if (!apps)
        return;
    for (size_t i = 0; i < l->n; i++)
        apps[i] = s->apps[l->idx[i]];
    sp_logger_set_appenders(lg, l->set ? apps : NULL, l->n);
    free(apps);
}

/* Forget the loggers the previous setup configured, remember this one's. */
static void reset_previous(const setup_t *s)
{
    for (size_t i = 0; i < nconfigured; i++) {
        sp_logger_t *lg = sp_logger(configured[i]);
        if (lg) {
            sp_logger_set_level(lg, SP_LEVEL_INHERIT);
            sp_logger_set_appenders(lg, NULL, 0);
        }
        free(configured[i]);
    }
    free(configured);
    nconfigured = 0;
    configured = calloc(s->nloggers + 1, sizeof *configured);
    for (size_t i = 0; configured && i < s->nloggers; i++)
        if ((configured[nconfigured] = strdup(s->loggers[i].name)))
            nconfigured++;
}

static void log_apply(void *staged, void *arg)
{
    (void)arg;
    setup_t *s = staged;
    reset_previous(s);
    for (size_t i = 0; i < s->nloggers; i++) {
        sp_logger_t *lg = sp_logger(s->loggers[i].name);
        if (!lg)
            continue;
        sp_logger_set_level(lg, (sp_log_level_t)s->loggers[i].level);
        set_apps(lg, s, &s->loggers[i].apps);
    }
    if (s->root.set) {
        set_apps(sp_log_root(), s, &s->root);
    } else {
        sp_log_appender_t *err = sp_log_stderr(NULL);
        if (err)
            sp_logger_set_appenders(sp_log_root(), &err, 1);
        sp_log_appender_release(err);
    }
    setup_free(s); /* the loggers hold their own references now */
}

static void log_discard(void *staged, void *arg)
{
    (void)arg;
    setup_free(staged);
}

/* ---- the variables ------------------------------------------------------- */

static int level_ok(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    sp_log_level_t l;
    if (sp_log_level_parse(v->u.s, &l) == 0)
        return 0;
    snprintf(msg, len, "unknown level '%s' (trace, debug, info, warn, error, fatal, off)",
             v->u.s);
    return -1;
}

static int pattern_ok(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    sp__log_pattern_t *p = sp__pattern_compile(v->u.s, msg, len);
    sp__pattern_free(p);
    return p ? 0 : -1;
}

static void on_level(const sp_cvar_t *v, const sp_cvalue_t *old, const sp_cvalue_t *cur,
                     void *arg)
{
    (void)v, (void)old, (void)arg;
    sp_log_level_t l;
    if (sp_log_level_parse(cur->u.s, &l) == 0)
        sp_logger_set_level(sp_log_root(), l);
}

static void on_pattern(const sp_cvar_t *v, const sp_cvalue_t *old, const sp_cvalue_t *cur,
                       void *arg)
{
    (void)v, (void)old, (void)arg;
    sp_log_set_pattern(cur->u.s, NULL, 0);
}

static void on_queue(const sp_cvar_t *v, const sp_cvalue_t *old, const sp_cvalue_t *cur,
                     void *arg)
{
    (void)v, (void)old, (void)arg;
    sp_log_set_queue_size((size_t)cur->u.i);
}

int sp_log_use_config(sp_config_t *cfg)
{
    static const sp_config_section_ops_t ops = {log_check, log_apply, log_discard};
    if (in_use)
        return -EEXIST;
    sp_cvar_t *level = NULL, *pattern = NULL, *queue = NULL;
    const sp_cvar_decl_t decls[] = {
        {"log.level", SP_CVAR_STRING, "info", NULL, NULL,
         "level of the root logger: trace, debug, info, warn, error, fatal, off", &level},
        {"log.pattern", SP_CVAR_STRING, SP_LOG_DEFAULT_PATTERN, NULL, NULL,
         "line pattern of appenders that set none", &pattern},
        {"log.queue_size", SP_CVAR_SIZE, "4MiB", "4KiB", "1GiB",
         "bytes of messages waiting for the log writer", &queue},
    };
    int rc = sp_config_declare(cfg, decls, 3, NULL);
    if (rc < 0)
        return rc;
    sp_cvar_set_check(level, level_ok, NULL);
    sp_cvar_set_check(pattern, pattern_ok, NULL);
    if ((rc = sp_cvar_listen(level, on_level, NULL)) < 0 ||
        (rc = sp_cvar_listen(pattern, on_pattern, NULL)) < 0 ||
        (rc = sp_cvar_listen(queue, on_queue, NULL)) < 0 ||
        (rc = sp_config_section(cfg, "log", &ops, NULL)) < 0)
        return rc;
    in_use = true;
    return 0;
}
