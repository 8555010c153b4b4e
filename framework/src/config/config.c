/* The configuration registry: life cycle, names, declarations (one by one
 * or as a table) and sections. Values and their publication are in
 * config_var.c, loads in config_load.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

void *sp__grow(void *arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *q = realloc(arr, ncap * sz);
    if (q)
        *cap = ncap;
    return q;
}

/* ---- registries --------------------------------------------------------- */

static sp_config_t *global;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

sp_config_t *sp_config_create(void)
{
    sp_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&cfg->lock, NULL);
    return cfg;
}

static void var_free(sp_cvar_t *v)
{
    for (int s = 0; s < SRC_COUNT; s++) {
        sp__value_free(&v->src[s].val);
        free(v->src[s].where);
    }
    sp__value_free(&v->def);
    free(v->name);
    free(v->desc);
    free(v->env);
    free(v->listeners);
    free(v);
}

void sp_config_destroy(sp_config_t *cfg)
{
    if (!cfg || cfg == global)
        return;
    for (size_t i = 0; i < cfg->nvars; i++)
        var_free(cfg->vars[i]);
    for (size_t i = 0; i < cfg->nsections; i++)
        free(cfg->sections[i].prefix);
    for (size_t i = 0; i < cfg->nretired; i++)
        free(cfg->retired[i]);
    free(cfg->vars);
    free(cfg->changes);
    free(cfg->sections);
    free(cfg->retired);
    pthread_mutex_destroy(&cfg->lock);
    free(cfg);
}

static void global_init(void)
{
    global = sp_config_create();
}

sp_config_t *sp_config_global(void)
{
    pthread_once(&global_once, global_init);
    return global;
}

sp_config_t *sp__config(sp_config_t *cfg)
{
    return cfg ? cfg : sp_config_global();
}

void sp__config_retire(sp_config_t *cfg, void *obj)
{
    if (!obj)
        return;
    /* If the list cannot grow the object leaks: freeing it could pull it
     * from under a reader. */
    void **r = sp__grow(cfg->retired, &cfg->capretired, cfg->nretired, sizeof *r);
    if (r) {
        cfg->retired = r;
        cfg->retired[cfg->nretired++] = obj;
    }
}

/* ---- names -------------------------------------------------------------- */

/* Dot-separated non-empty parts of letters, digits, '_' and '-'. */
static bool name_ok(const char *name)
{
    if (!name || !*name)
        return false;
    bool part_empty = true;
    for (const char *p = name; *p; p++) {
        if (*p == '.') {
            if (part_empty)
                return false;
            part_empty = true;
        } else if (isalnum((unsigned char)*p) || *p == '_' || *p == '-') {
            part_empty = false;
        } else {
            return false;
        }
    }
    return !part_empty;
}

/* Whether `prefix` is a dotted prefix of `name` ("http" of "http.port"). */
static bool dotted_prefix(const char *prefix, const char *name)
{
    size_t n = strlen(prefix);
    return strncmp(prefix, name, n) == 0 && name[n] == '.';
}

static char *env_name(const char *name)
{
    static const char pre[] = "SPINDLE_";
    char *e = malloc(sizeof pre + strlen(name));
    if (!e)
        return NULL;
    char *q = stpcpy(e, pre);
    for (const char *p = name; *p; p++)
        *q++ = (*p == '.' || *p == '-') ? '_' : (char)toupper((unsigned char)*p);
    *q = '\0';
    return e;
}

long sp__config_index(sp_config_t *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nvars; i++)
        if (strcmp(cfg->vars[i]->name, name) == 0)
            return (long)i;
    return -1;
}

bool sp__config_is_var_prefix(sp_config_t *cfg, const char *prefix)
{
    for (size_t i = 0; i < cfg->nvars; i++)
        if (dotted_prefix(prefix, cfg->vars[i]->name))
            return true;
    return false;
}

sp__csection_t *sp__config_section_of(sp_config_t *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nsections; i++) {
        sp__csection_t *s = &cfg->sections[i];
        if (strcmp(s->prefix, name) == 0 || dotted_prefix(s->prefix, name))
            return s;
    }
    return NULL;
}

/* Would a variable called `name` clash with what is declared? */
static bool var_clashes(sp_config_t *cfg, const char *name, const char *env)
{
    for (size_t i = 0; i < cfg->nvars; i++) {
        const sp_cvar_t *o = cfg->vars[i];
        if (strcmp(o->name, name) == 0 || strcmp(o->env, env) == 0 ||
            dotted_prefix(o->name, name) || dotted_prefix(name, o->name))
            return true;
    }
    for (size_t i = 0; i < cfg->nsections; i++) {
        const char *p = cfg->sections[i].prefix;
        if (strcmp(p, name) == 0 || dotted_prefix(name, p))
            return true;
    }
    return false;
}

/* ---- declaring ---------------------------------------------------------- */

/* Grow the variable and change arrays for one more: 0 or ENOMEM. */
static int room_for_var(sp_config_t *cfg)
{
    size_t cap = cfg->capvars;
    sp_cvar_t **vars = sp__grow(cfg->vars, &cap, cfg->nvars, sizeof *vars);
    if (vars) {
        cfg->vars = vars;
        cfg->capvars = cap;
    }
    sp__cchange_t *ch = sp__grow(cfg->changes, &cfg->capchanges, cfg->nvars, sizeof *ch);
    if (ch)
        cfg->changes = ch;
    return vars && ch ? 0 : ENOMEM;
}

typedef struct decl {
    const char *name, *desc;
    int64_t imin, imax;
    double fmin, fmax;
} decl_t;

/* Declare a variable; takes ownership of *def in every case. */
static sp_cvar_t *declare(sp_config_t *cfg, const decl_t *d, sp_cvalue_t *def)
{
    cfg = sp__config(cfg);
    int err = ENOMEM;
    sp_cvar_t *v = calloc(1, sizeof *v);
    if (!cfg || !v)
        goto err;
    v->cfg = cfg;
    v->type = def->type;
    v->def = *def;
    def->type = SP_CVAR_INT; /* ownership moved */
    v->imin = d->imin, v->imax = d->imax, v->fmin = d->fmin, v->fmax = d->fmax;
    err = EINVAL;
    char msg[256];
    if (!name_ok(d->name) || v->imin > v->imax || !(v->fmin <= v->fmax) ||
        sp__value_check(v, &v->def, msg, sizeof msg) < 0)
        goto err;
    err = ENOMEM;
    v->name = strdup(d->name);
    v->desc = strdup(d->desc ? d->desc : "");
    v->env = env_name(d->name);
    if (!v->name || !v->desc || !v->env)
        goto err;
    sp__cvar_publish(v, &v->def, "default");
    pthread_mutex_lock(&cfg->lock);
    err = var_clashes(cfg, v->name, v->env) ? EEXIST : room_for_var(cfg);
    if (!err) {
        cfg->vars[cfg->nvars++] = v;
        for (size_t i = 0; i < cfg->nsections; i++)
            if (dotted_prefix(cfg->sections[i].prefix, v->name))
                cfg->sections[i].has_vars = true;
    }
    pthread_mutex_unlock(&cfg->lock);
    if (!err)
        return v;
err:
    if (v)
        var_free(v);
    else
        sp__value_free(def);
    errno = err;
    return NULL;
}

static sp_cvar_t *declare_int(sp_config_t *cfg, sp_cvar_type_t t, const char *name,
                              int64_t def, int64_t min, int64_t max, const char *desc)
{
    decl_t d = {name, desc, min, max, 0, 0};
    sp_cvalue_t v = {.type = t, .u.i = def};
    return declare(cfg, &d, &v);
}

sp_cvar_t *sp_config_int(sp_config_t *cfg, const char *name, int64_t def,
                         int64_t min, int64_t max, const char *desc)
{
    return declare_int(cfg, SP_CVAR_INT, name, def, min, max, desc);
}

sp_cvar_t *sp_config_duration(sp_config_t *cfg, const char *name, int64_t def_us,
                              int64_t min_us, int64_t max_us, const char *desc)
{
    return declare_int(cfg, SP_CVAR_DURATION, name, def_us, min_us, max_us, desc);
}

sp_cvar_t *sp_config_size(sp_config_t *cfg, const char *name, int64_t def,
                          int64_t min, int64_t max, const char *desc)
{
    return declare_int(cfg, SP_CVAR_SIZE, name, def, min, max, desc);
}

sp_cvar_t *sp_config_float(sp_config_t *cfg, const char *name, double def,
                           double min, double max, const char *desc)
{
    decl_t d = {name, desc, 0, 0, min, max};
    sp_cvalue_t v = {.type = SP_CVAR_FLOAT, .u.f = def};
    return declare(cfg, &d, &v);
}

sp_cvar_t *sp_config_bool(sp_config_t *cfg, const char *name, bool def,
                          const char *desc)
{
    decl_t d = {name, desc, 0, 0, 0, 0};
    sp_cvalue_t v = {.type = SP_CVAR_BOOL, .u.b = def};
    return declare(cfg, &d, &v);
}

/* Declare with a heap default made by `rc` (0 or -ENOMEM). */
static sp_cvar_t *declare_made(sp_config_t *cfg, const char *name, const char *desc,
                               int rc, sp_cvalue_t *v)
{
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    decl_t d = {name, desc, 0, 0, 0, 0};
    return declare(cfg, &d, v);
}

sp_cvar_t *sp_config_string(sp_config_t *cfg, const char *name, const char *def,
                            const char *desc)
{
    sp_cvalue_t v;
    return declare_made(cfg, name, desc, sp__value_string(def, &v), &v);
}

static size_t count_strs(const char *const *a)
{
    size_t n = 0;
    while (a && a[n])
        n++;
    return n;
}

sp_cvar_t *sp_config_list(sp_config_t *cfg, const char *name,
                          const char *const *def, const char *desc)
{
    sp_cvalue_t v;
    return declare_made(cfg, name, desc, sp__value_list(def, count_strs(def), &v), &v);
}

sp_cvar_t *sp_config_map(sp_config_t *cfg, const char *name,
                         const char *const *def, const char *desc)
{
    size_t n = count_strs(def);
    for (size_t i = 0; i + 1 < n; i += 2) /* keys must be unique */
        for (size_t j = 0; j < i; j += 2)
            if (strcmp(def[i], def[j]) == 0)
                n = 1;
    if (n % 2) {
        errno = EINVAL;
        return NULL;
    }
    sp_cvalue_t v;
    return declare_made(cfg, name, desc, sp__value_map(def, n / 2, &v), &v);
}

/* One table entry: parse its default and bounds, then declare. */
static int declare_entry(sp_config_t *cfg, const sp_cvar_decl_t *e,
                         sp_config_report_t *r)
{
    char msg[256];
    const char *what = e->name ? e->name : "(null)";
    decl_t d = {e->name, e->desc, INT64_MIN, INT64_MAX, -HUGE_VAL, HUGE_VAL};
    const char *texts[2] = {e->min, e->max};
    for (int b = 0; b < 2; b++) {
        sp_cvalue_t bound;
        if (!texts[b] || !sp__type_is_scalar(e->type) || e->type == SP_CVAR_BOOL)
            continue;
        if (sp__value_parse(e->type, texts[b], &bound, msg, sizeof msg) < 0) {
            sp__report(r, what, "bad %s: %s", b ? "max" : "min", msg);
            return -EINVAL;
        }
        if (e->type == SP_CVAR_FLOAT)
            *(b ? &d.fmax : &d.fmin) = bound.u.f;
        else
            *(b ? &d.imax : &d.imin) = bound.u.i;
    }
    sp_cvalue_t def = {.type = e->type};
    if (e->def && sp__value_parse(e->type, e->def, &def, msg, sizeof msg) < 0) {
        sp__report(r, what, "bad default: %s", msg);
        return -EINVAL;
    }
    int rc = e->def ? 0
             : e->type == SP_CVAR_STRING ? sp__value_string("", &def)
             : e->type == SP_CVAR_LIST   ? sp__value_list(NULL, 0, &def)
             : e->type == SP_CVAR_MAP    ? sp__value_map(NULL, 0, &def)
                                         : 0;
    if (rc < 0)
        return rc;
    sp_cvar_t *v = declare(cfg, &d, &def);
    if (!v) {
        rc = -errno;
        sp__report(r, what, "%s", rc == -EEXIST ? "already declared (or clashes)"
                                  : rc == -EINVAL ? "bad name, bounds or default"
                                                  : "out of memory");
        return rc;
    }
    if (e->out)
        *e->out = v;
    return 0;
}

int sp_config_declare(sp_config_t *cfg, const sp_cvar_decl_t *decls, size_t n,
                      char **errors)
{
    sp_config_report_t r = {0};
    cfg = sp__config(cfg);
    size_t before = cfg->nvars;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = declare_entry(cfg, &decls[i], &r);
    if (rc < 0) {
        /* All or none: drop what this table declared. Nothing was loaded
         * into them, so no reader can hold their values yet. */
        pthread_mutex_lock(&cfg->lock);
        while (cfg->nvars > before)
            var_free(cfg->vars[--cfg->nvars]);
        for (size_t i = 0; i < cfg->nsections; i++)
            cfg->sections[i].has_vars =
                sp__config_is_var_prefix(cfg, cfg->sections[i].prefix);
        pthread_mutex_unlock(&cfg->lock);
    }
    return sp__report_finish(&r, rc, errors);
}

int sp_config_section(sp_config_t *cfg, const char *prefix,
                      const sp_config_section_ops_t *ops, void *arg)
{
    cfg = sp__config(cfg);
    if (!cfg)
        return -ENOMEM;
    if (!name_ok(prefix))
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&cfg->lock);
    for (size_t i = 0; i < cfg->nsections && !rc; i++) {
        const char *p = cfg->sections[i].prefix;
        if (strcmp(p, prefix) == 0 || dotted_prefix(p, prefix) || dotted_prefix(prefix, p))
            rc = -EEXIST;
    }
    for (size_t i = 0; i < cfg->nvars && !rc; i++)
        if (strcmp(cfg->vars[i]->name, prefix) == 0 ||
            dotted_prefix(cfg->vars[i]->name, prefix))
            rc = -EEXIST;
    sp__csection_t *secs = NULL;
    if (!rc && !(secs = sp__grow(cfg->sections, &cfg->capsections, cfg->nsections,
                                 sizeof *secs)))
        rc = -ENOMEM;
    if (secs)
        cfg->sections = secs;
    sp__csection_t s = {strdup(prefix), {0}, ops != NULL, arg,
                       sp__config_is_var_prefix(cfg, prefix)};
    if (!rc && !s.prefix)
        rc = -ENOMEM;
    if (!rc) {
        if (ops)
            s.ops = *ops;
        cfg->sections[cfg->nsections++] = s;
    } else {
        free(s.prefix);
    }
    pthread_mutex_unlock(&cfg->lock);
    return rc;
}

sp_cvar_t *sp_config_find(sp_config_t *cfg, const char *name)
{
    cfg = sp__config(cfg);
    if (!cfg || !name)
        return NULL;
    pthread_mutex_lock(&cfg->lock);
    long i = sp__config_index(cfg, name);
    sp_cvar_t *v = i < 0 ? NULL : cfg->vars[i];
    pthread_mutex_unlock(&cfg->lock);
    return v;
}
