/* A load is a transaction over one value source (files, environment or
 * command line): every value is parsed and checked into a staging area,
 * section handlers check their subtrees, and only if nothing at all was
 * wrong are the staged slots swapped in and committed. On any error the
 * staging area is thrown away and the registry is untouched.
 *
 * YAML keys map to dotted names: at each mapping, a key's full name is
 * looked up as a variable, then as the prefix of variables (recurse), then
 * as something under a section, and is otherwise unknown. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_internal.h"

static int txn_begin(sp__txn_t *t, sp_config_t *cfg, int src, bool replace)
{
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->src = src;
    t->replace = replace;
    size_t n = cfg->nvars + 1, ns = cfg->nsections + 1;
    t->slots = calloc(n, sizeof *t->slots);
    t->touched = calloc(n, sizeof *t->touched);
    t->first = calloc(n, sizeof *t->first);
    t->secs = calloc(ns, sizeof *t->secs);
    return t->slots && t->touched && t->first && t->secs ? 0 : -ENOMEM;
}

static void slot_clear(sp__cslot_t *s)
{
    sp__value_free(&s->val);
    free(s->where);
    memset(s, 0, sizeof *s);
}

static void txn_end(sp__txn_t *t)
{
    for (size_t i = 0; t->slots && i < t->cfg->nvars; i++)
        slot_clear(&t->slots[i]);
    for (size_t i = 0; t->secs && i < t->cfg->nsections; i++) {
        sp__sec_stage_t *s = &t->secs[i];
        const sp__csection_t *sec = &t->cfg->sections[i];
        if (s->checked && sec->ops.discard)
            sec->ops.discard(s->staged, sec->arg);
        free(s->keys);
        free(s->vals);
    }
    free(t->slots);
    free(t->touched);
    free(t->first);
    free(t->secs);
    sp__arena_free(&t->arena);
}

/* ---- staging variables --------------------------------------------------- */

/* Stage `val` (owned) for variable i, set at `where` (copied). */
static void stage(sp__txn_t *t, size_t i, sp_cvalue_t *val, const char *where)
{
    sp__cslot_t *s = &t->slots[i];
    slot_clear(s);
    t->touched[i] = true;
    if (!val)
        return; /* staged as "not set" */
    s->where = strdup(where);
    if (!s->where) {
        t->report.oom = true;
        sp__value_free(val);
        return;
    }
    s->set = true;
    s->val = *val;
}

static bool same_file(const sp_cnode_t *a, const sp_cnode_t *b)
{
    return a && b && a->file == b->file;
}

static void stage_node(sp__txn_t *t, size_t i, const sp_cnode_t *key,
                       const sp_cnode_t *n)
{
    sp_cvar_t *v = t->cfg->vars[i];
    if (same_file(t->first[i], key)) {
        sp_config_error(&t->report, key, "%s is set twice (first at line %u)", v->name,
                        t->first[i]->line);
        return;
    }
    t->first[i] = key;
    if (sp__node_is_null(n)) {
        stage(t, i, NULL, NULL);
        return;
    }
    char msg[512], where[512];
    const sp_cnode_t *at;
    sp_cvalue_t val;
    if (sp__value_from_node(v, n, &val, &at, msg, sizeof msg) < 0) {
        sp_config_error(&t->report, at, "%s: %s", v->name, msg);
        return;
    }
    sp__node_where(key, where, sizeof where);
    stage(t, i, &val, where);
}

void sp__stage_text(sp__txn_t *t, size_t i, const char *text, const char *where,
                       const char *what)
{
    sp_cvar_t *v = t->cfg->vars[i];
    char msg[512];
    sp_cvalue_t val;
    if (sp__value_from_text(v, text, &val, msg, sizeof msg) < 0)
        sp__report(&t->report, what, "%s: %s", v->name, msg);
    else
        stage(t, i, &val, where);
}

/* ---- sections ------------------------------------------------------------ */

static void sec_entry(sp__txn_t *t, sp__sec_stage_t *s, const char *prefix, const char *rel,
                      const sp_cnode_t *key, const sp_cnode_t *n)
{
    if (s->whole) {
        sp_config_error(&t->report, key, "%s is set both as a whole and by key", prefix);
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->keys[i]->text, rel) != 0)
            continue;
        if (same_file(s->keys[i], key)) {
            sp_config_error(&t->report, key, "%s.%s is set twice (first at line %u)",
                            prefix, rel, s->keys[i]->line);
            return;
        }
        s->vals[i] = n; /* a later file wins */
        return;
    }
    sp_cnode_t *k = sp__arena_alloc(&t->arena, sizeof *k);
    size_t cap = s->cap;
    const sp_cnode_t **vals = sp__grow(s->vals, &cap, s->n, sizeof *vals);
    if (vals)
        s->vals = vals;
    const sp_cnode_t **keys = vals ? sp__grow(s->keys, &s->cap, s->n, sizeof *keys) : NULL;
    if (keys)
        s->keys = keys;
    if (!k || !keys) {
        t->report.oom = true;
        return;
    }
    *k = *key;
    k->text = sp__arena_strdup(&t->arena, rel, strlen(rel)); /* relative key */
    if (!k->text) {
        t->report.oom = true;
        return;
    }
    s->keys[s->n] = k;
    s->vals[s->n++] = n;
}

static void stage_section(sp__txn_t *t, sp__csection_t *sec, const char *full,
                          const sp_cnode_t *key, const sp_cnode_t *n)
{
    sp__sec_stage_t *s = &t->secs[sec - t->cfg->sections];
    size_t plen = strlen(sec->prefix);
    if (full[plen] == '.') {
        sec_entry(t, s, sec->prefix, full + plen + 1, key, n);
    } else if (n->kind == SP_CNODE_MAP) {
        for (size_t i = 0; i < n->n; i++)
            sec_entry(t, s, sec->prefix, n->keys[i]->text, n->keys[i], n->items[i]);
    } else if (!sp__node_is_null(n)) {
        if (s->n || same_file(s->whole, n))
            sp_config_error(&t->report, key, "%s is set twice", sec->prefix);
        s->whole = n;
    }
}

/* The node a section's check() sees: its whole node, or a map made of the
 * merged entries, or NULL. */
static const sp_cnode_t *sec_node(sp__txn_t *t, sp__sec_stage_t *s)
{
    if (s->whole || !s->n)
        return s->whole;
    sp_cnode_t *m = sp__node_map(&t->arena, s->keys[0], s->n);
    if (!m) {
        t->report.oom = true;
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        m->keys[i] = s->keys[i];
        m->items[i] = s->vals[i];
    }
    m->n = s->n;
    return m;
}

static void check_sections(sp__txn_t *t)
{
    /* A section's content may depend on a file that failed to parse; its
     * complaints would then only add noise. */
    if (t->report.count || t->report.oom)
        return;
    for (size_t i = 0; i < t->cfg->nsections; i++) {
        sp__csection_t *sec = &t->cfg->sections[i];
        sp__sec_stage_t *s = &t->secs[i];
        if (!sec->ops.check)
            continue;
        const sp_cnode_t *node = sec_node(t, s);
        unsigned before = t->report.count;
        if (sec->ops.check(node, &t->report, &s->staged, sec->arg) == 0)
            s->checked = true;
        else if (t->report.count == before)
            sp__report(&t->report, sec->prefix, "rejected");
    }
}

/* ---- walking YAML -------------------------------------------------------- */

static void walk_map(sp__txn_t *t, const sp_cnode_t *map, const char *prefix);

static void walk_entry(sp__txn_t *t, const char *full, const sp_cnode_t *key,
                       const sp_cnode_t *n)
{
    sp_config_t *cfg = t->cfg;
    long i = sp__config_index(cfg, full);
    sp__csection_t *sec;
    if (i >= 0) {
        stage_node(t, (size_t)i, key, n);
    } else if (sp__config_is_var_prefix(cfg, full)) {
        if (n->kind == SP_CNODE_MAP)
            walk_map(t, n, full);
        else if (!sp__node_is_null(n))
            sp_config_error(&t->report, n, "%s: expected a mapping", full);
    } else if ((sec = sp__config_section_of(cfg, full))) {
        stage_section(t, sec, full, key, n);
    } else {
        sp_config_error(&t->report, key, "unknown key '%s'", full);
    }
}

static void walk_map(sp__txn_t *t, const sp_cnode_t *map, const char *prefix)
{
    for (size_t i = 0; i < map->n; i++) {
        const char *k = map->keys[i]->text;
        size_t plen = prefix ? strlen(prefix) + 1 : 0;
        char *full = malloc(plen + strlen(k) + 1);
        if (!full) {
            t->report.oom = true;
            return;
        }
        if (prefix)
            sprintf(full, "%s.%s", prefix, k);
        else
            strcpy(full, k);
        walk_entry(t, full, map->keys[i], map->items[i]);
        free(full);
    }
}

static void walk_doc(sp__txn_t *t, const char *file, const char *text, size_t len)
{
    const sp_cnode_t *root;
    const char *name = sp__arena_strdup(&t->arena, file, strlen(file));
    if (!name) {
        t->report.oom = true;
        return;
    }
    if (sp__yaml_parse(&t->arena, name, text, len, &root, &t->report) < 0 || !root)
        return;
    if (root->kind == SP_CNODE_MAP)
        walk_map(t, root, NULL);
    else if (!sp__node_is_null(root))
        sp_config_error(&t->report, root, "the top level must be a mapping");
}

/* ---- files ---------------------------------------------------------------- */

static int read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0) {
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                rc = -ENOMEM;
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            rc = ferror(f) ? -EIO : 1;
    }
    fclose(f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return 0;
}

static void walk_file(sp__txn_t *t, const char *path, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    int r = read_file(path, &text, &len);
    if (r < 0) {
        sp__report(&t->report, path, "cannot read: %s", strerror(-r));
        if (*rc == 0)
            *rc = r;
        return;
    }
    walk_doc(t, path, text, len);
    free(text);
}

static bool is_yaml_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' && ((l > 4 && strcmp(n + l - 4, ".yml") == 0) ||
                           (l > 5 && strcmp(n + l - 5, ".yaml") == 0));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk_dir(sp__txn_t *t, const char *dir, int *rc)
{
    DIR *d = opendir(dir);
    if (!d) {
        *rc = -errno;
        sp__report(&t->report, dir, "cannot open: %s", strerror(-*rc));
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_yaml_name(e->d_name))
            continue;
        char *p = malloc(strlen(dir) + strlen(e->d_name) + 2);
        char **more = p ? sp__grow(names, &cap, n, sizeof *more) : NULL;
        if (!more) {
            free(p);
            t->report.oom = true;
            break;
        }
        names = more;
        sprintf(p, "%s/%s", dir, e->d_name);
        names[n++] = p;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        walk_file(t, names[i], rc);
        free(names[i]);
    }
    free(names);
}

/* ---- commit ------------------------------------------------------------- */

/* Swap a staged slot in. An unchanged value keeps its old object (and
 * source text) so repeated reloads do not pile up retired copies. */
static void swap_slot(sp_config_t *cfg, sp__cslot_t *old, sp__cslot_t *staged)
{
    if (old->set && staged->set && sp__value_equal(&old->val, &staged->val)) {
        sp__value_free(&staged->val);
        staged->val = old->val;
        old->val.type = SP_CVAR_INT; /* moved */
        if (strcmp(old->where, staged->where) == 0) {
            free(staged->where);
            staged->where = old->where;
            old->where = NULL;
        }
    }
    sp__config_retire(cfg, sp__value_object(&old->val));
    sp__config_retire(cfg, old->where);
    *old = *staged;
    memset(staged, 0, sizeof *staged);
}

int sp__txn_finish(sp__txn_t *t, int rc, char **errors)
{
    sp_config_t *cfg = t->cfg;
    if (rc == 0 && t->report.oom)
        rc = -ENOMEM;
    if (rc == 0 && t->report.count)
        rc = -EINVAL;
    if (rc == 0) {
        for (size_t i = 0; i < cfg->nvars; i++) {
            sp__cslot_t none = {0};
            sp__cslot_t *staged = t->touched[i] ? &t->slots[i] : t->replace ? &none : NULL;
            if (staged)
                swap_slot(cfg, &cfg->vars[i]->src[t->src], staged);
        }
        for (size_t i = 0; i < cfg->nsections; i++) {
            sp__csection_t *sec = &cfg->sections[i];
            if (t->secs[i].checked && sec->ops.apply)
                sec->ops.apply(t->secs[i].staged, sec->arg);
            t->secs[i].checked = false;
        }
        sp__config_commit(cfg);
    }
    txn_end(t);
    pthread_mutex_unlock(&cfg->lock);
    return sp__report_finish(&t->report, rc, errors);
}

int sp__txn_open(sp__txn_t *t, sp_config_t **cfg, int src, bool replace, char **errors)
{
    if (errors)
        *errors = NULL;
    *cfg = sp__config(*cfg);
    if (!*cfg)
        return -ENOMEM;
    pthread_mutex_lock(&(*cfg)->lock);
    int rc = txn_begin(t, *cfg, src, replace);
    if (rc < 0)
        return sp__txn_finish(t, rc, errors);
    return 0;
}

int sp_config_load(sp_config_t *cfg, const char *path, char **errors)
{
    sp__txn_t t;
    int rc = sp__txn_open(&t, &cfg, SRC_FILE, true, errors);
    if (rc < 0)
        return rc;
    struct stat st;
    if (!path || stat(path, &st) < 0) {
        rc = path ? -errno : -EINVAL;
        sp__report(&t.report, path ? path : "(null)", "cannot read: %s", strerror(-rc));
    } else if (S_ISDIR(st.st_mode)) {
        walk_dir(&t, path, &rc);
    } else {
        walk_file(&t, path, &rc);
    }
    check_sections(&t);
    return sp__txn_finish(&t, rc, errors);
}

int sp_config_load_string(sp_config_t *cfg, const char *name, const char *yaml,
                          size_t len, char **errors)
{
    sp__txn_t t;
    int rc = sp__txn_open(&t, &cfg, SRC_FILE, true, errors);
    if (rc < 0)
        return rc;
    walk_doc(&t, name ? name : "(string)", yaml, len);
    check_sections(&t);
    return sp__txn_finish(&t, 0, errors);
}
