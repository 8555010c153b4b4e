/* spindle configuration: typed variables declared in code, loaded from YAML.
 *
 * A variable has a dotted name ("http.keepalive_timeout"), a type, a default
 * and a description, and lives in a registry (sp_config_t; pass NULL for the
 * process-wide one). Its value comes from, lowest precedence first:
 *
 *   default  <  YAML files  <  environment  <  command line (-s key=value)
 *
 * Each source is kept separately, so reloading the files never overrides a
 * value set from the environment or the command line. YAML nesting maps to
 * dotted names: `http: {keepalive_timeout: 5s}` sets http.keepalive_timeout.
 * The environment variable of "http.keepalive_timeout" is
 * SPINDLE_HTTP_KEEPALIVE_TIMEOUT (prefix SPINDLE_, '.' and '-' become '_',
 * upper case). docs/config.md describes every value syntax.
 *
 * Every load is atomic: it checks everything first and, if anything is wrong
 * (malformed YAML, wrong type, out of range, unknown key), changes nothing
 * and returns every problem as "file:line:column: what is wrong" lines. Only
 * a load that succeeds applies its values, calls section handlers, then
 * calls change listeners.
 *
 * Threads: getters may be called from any thread at any time, also while a
 * load runs on another thread. Scalars are atomics; strings, lists and maps
 * are immutable objects published with an atomic pointer swap. A replaced
 * object is not freed until sp_config_destroy(), so a pointer returned by a
 * getter stays valid for the registry's lifetime (a reload that changes a
 * string keeps the old one: reloads are rare and values small, and in
 * exchange readers never lock or copy). Declarations and loads serialise on
 * the registry's lock; listeners and section handlers run on the loading
 * thread and must not load into, or declare in, the same registry.
 *
 * Errors: functions returning int give 0 or a negative errno; constructors
 * return NULL and set errno. Where a `char **errors` argument is taken it may
 * be NULL; otherwise on failure *errors receives a malloc'd text (one problem
 * per line) that the caller frees, and on success NULL.
 */
#ifndef SPINDLE_CONFIG_H
#define SPINDLE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_config sp_config_t;
typedef struct sp_cvar sp_cvar_t;

typedef enum sp_cvar_type {
    SP_CVAR_INT,      /* int64_t, with bounds */
    SP_CVAR_FLOAT,    /* double, with bounds */
    SP_CVAR_BOOL,     /* true/false, yes/no, on/off, 1/0 */
    SP_CVAR_STRING,   /* any text */
    SP_CVAR_DURATION, /* "30s", "250ms", "1.5s", "1h30m": int64_t microseconds */
    SP_CVAR_SIZE,     /* "16KiB", "4MiB", "1GB", "512": int64_t bytes */
    SP_CVAR_LIST,     /* YAML sequence of scalars */
    SP_CVAR_MAP       /* YAML mapping of scalar to scalar */
} sp_cvar_type_t;

/* Immutable list and map values. Map entries keep the order they were
 * written in; keys are unique. */
typedef struct sp_strlist {
    size_t n;
    const char *const *items;
} sp_strlist_t;

typedef struct sp_strmap {
    size_t n;
    const char *const *keys;
    const char *const *values;
} sp_strmap_t;

/* The value of a string-map key, or NULL. */
const char *sp_strmap_get(const sp_strmap_t *m, const char *key);

/* A value of any type, as handed to listeners and checks. Pointers are
 * valid for the registry's lifetime. */
typedef struct sp_cvalue {
    sp_cvar_type_t type;
    union {
        int64_t i; /* INT, DURATION (microseconds), SIZE (bytes) */
        double f;
        bool b;
        const char *s;
        const sp_strlist_t *list;
        const sp_strmap_t *map;
    } u;
} sp_cvalue_t;

/* ---- registries ---------------------------------------------------------- */

/* A new, empty registry. NULL + errno (ENOMEM). */
sp_config_t *sp_config_create(void);
/* Free a registry, its variables and every value it ever published. */
void sp_config_destroy(sp_config_t *cfg);
/* The process-wide registry that NULL stands for; never destroyed. */
sp_config_t *sp_config_global(void);

/* ---- declaring variables ------------------------------------------------- */

/* Each returns the variable, or NULL + errno: EINVAL for a bad name (letters,
 * digits, '_' and '-' in non-empty dot-separated parts), a default outside
 * [min, max] or min > max; EEXIST when the name or its environment variable
 * name is taken, or when it is a dotted prefix of another variable or
 * section or has a variable as prefix ("http" beside "http.port"); a
 * variable inside a section is fine. ENOMEM. `desc` may be NULL; strings
 * are copied. Declare every variable before the first load: a later one
 * starts from its default. */
sp_cvar_t *sp_config_int(sp_config_t *cfg, const char *name, int64_t def,
                         int64_t min, int64_t max, const char *desc);
sp_cvar_t *sp_config_float(sp_config_t *cfg, const char *name, double def,
                           double min, double max, const char *desc);
sp_cvar_t *sp_config_bool(sp_config_t *cfg, const char *name, bool def,
                          const char *desc);
sp_cvar_t *sp_config_string(sp_config_t *cfg, const char *name,
                            const char *def, const char *desc);
sp_cvar_t *sp_config_duration(sp_config_t *cfg, const char *name,
                              int64_t def_us, int64_t min_us, int64_t max_us,
                              const char *desc);
sp_cvar_t *sp_config_size(sp_config_t *cfg, const char *name, int64_t def,
                          int64_t min, int64_t max, const char *desc);
/* `def` is a NULL-terminated array of strings, or NULL for an empty list. */
sp_cvar_t *sp_config_list(sp_config_t *cfg, const char *name,
                          const char *const *def, const char *desc);
/* `def` is a NULL-terminated array of key, value, key, value..., or NULL. */
sp_cvar_t *sp_config_map(sp_config_t *cfg, const char *name,
                         const char *const *def, const char *desc);

/* The same, as a declaration table (redis config.c style). Defaults and
 * bounds are written as in a config file ("30s", "4MiB", "[a, b]"); NULL
 * means zero/empty for a default and the type's limit for a bound. */
typedef struct sp_cvar_decl {
    const char *name;
    sp_cvar_type_t type;
    const char *def;
    const char *min, *max; /* INT, FLOAT, DURATION, SIZE only */
    const char *desc;
    sp_cvar_t **out; /* receives the variable; may be NULL */
} sp_cvar_decl_t;

/* Declare n variables, all or none. 0, -EINVAL, -EEXIST or -ENOMEM, with
 * every problem in *errors ("name: what is wrong"). */
int sp_config_declare(sp_config_t *cfg, const sp_cvar_decl_t *decls, size_t n,
                      char **errors);

/* The variable called `name`, or NULL. */
sp_cvar_t *sp_config_find(sp_config_t *cfg, const char *name);

/* ---- reading ------------------------------------------------------------- */

/* Getters of the matching type; a mismatch returns 0, false or NULL. INT,
 * DURATION and SIZE are all int64_t and sp_cvar_int() reads any of them. */
int64_t sp_cvar_int(const sp_cvar_t *v);
double sp_cvar_float(const sp_cvar_t *v);
bool sp_cvar_bool(const sp_cvar_t *v);
const char *sp_cvar_string(const sp_cvar_t *v);
int64_t sp_cvar_duration(const sp_cvar_t *v); /* microseconds */
int64_t sp_cvar_size(const sp_cvar_t *v);     /* bytes */
const sp_strlist_t *sp_cvar_list(const sp_cvar_t *v);
const sp_strmap_t *sp_cvar_map(const sp_cvar_t *v);
/* Any type. */
void sp_cvar_get(const sp_cvar_t *v, sp_cvalue_t *out);

const char *sp_cvar_name(const sp_cvar_t *v);
const char *sp_cvar_desc(const sp_cvar_t *v);
sp_cvar_type_t sp_cvar_type(const sp_cvar_t *v);
/* Where the current value came from: "default", "FILE:LINE:COLUMN",
 * "env NAME" or "cli". Valid for the registry's lifetime. */
const char *sp_cvar_source(const sp_cvar_t *v);
/* The environment variable name, e.g. "SPINDLE_HTTP_WORKERS". */
const char *sp_cvar_env_name(const sp_cvar_t *v);

/* ---- validation and change listeners -------------------------------------- */

/* An extra check beyond type and bounds, run on every value from every
 * source before anything is applied. Return 0 to accept; otherwise write
 * the reason into msg (at most len bytes) and return -1. */
typedef int (*sp_cvar_check_fn)(const sp_cvalue_t *value, char *msg,
                                size_t len, void *arg);
/* One check per variable; installing one replaces the previous. The
 * current value is not re-checked. 0 or -EINVAL. */
int sp_cvar_set_check(sp_cvar_t *v, sp_cvar_check_fn fn, void *arg);

/* Called after a successful load changed the variable's value, with the
 * old and the new value, on the loading thread, in declaration order, after
 * every variable of the load has its new value. */
typedef void (*sp_cvar_listener_fn)(const sp_cvar_t *v, const sp_cvalue_t *old,
                                    const sp_cvalue_t *cur, void *arg);
/* 0, -EINVAL, -ENOMEM. Listeners are never removed. */
int sp_cvar_listen(sp_cvar_t *v, sp_cvar_listener_fn fn, void *arg);

/* ---- loading ------------------------------------------------------------- */

/* Load a YAML file, or every *.yml and *.yaml file of a directory in sorted
 * order (a key set again in a later file wins; set twice in one file is an
 * error). This replaces everything earlier loads read from files: a key
 * no longer present goes back to its default (or env/cli value).
 * 0, -EINVAL (bad configuration), -ENOENT / -EACCES / ... (cannot read),
 * -ENOMEM. */
int sp_config_load(sp_config_t *cfg, const char *path, char **errors);
/* The same from memory; `name` stands for the file name in messages. */
int sp_config_load_string(sp_config_t *cfg, const char *name,
                          const char *yaml, size_t len, char **errors);
/* Read SPINDLE_* for every declared variable; replaces what earlier calls
 * read. Unset variables fall back to files and defaults. Environment
 * variables that match no declared variable are ignored. */
int sp_config_load_env(sp_config_t *cfg, char **errors);
/* Apply one command-line setting "key=value" (a list or map value is YAML
 * flow syntax, "[a, b]" or "{k: v}"; a list may also be "a,b"). */
int sp_config_set(sp_config_t *cfg, const char *setting, char **errors);
/* Take every "-s key=value", "-skey=value" and "--set key=value" out of
 * argv (stopping at "--"), apply them all or none, and compact argv and
 * *argc to what is left. argv[0] is skipped. */
int sp_config_args(sp_config_t *cfg, int *argc, char **argv, char **errors);
/* Forget every command-line setting (for tests and embedders). */
int sp_config_clear_cli(sp_config_t *cfg);

/* Write every variable, its value and its source, in name order, as YAML
 * with comments (the --print-config output). 0 or -EIO. */
int sp_config_print(sp_config_t *cfg, FILE *out);

/* ---- value syntax --------------------------------------------------------- */

/* Parse a duration ("1.5s", "250ms", "1h30m", "0") into microseconds, or a
 * size ("16KiB", "1GB", "512") into bytes. 0 or -EINVAL / -ERANGE. */
int sp_parse_duration(const char *text, int64_t *us);
int sp_parse_size(const char *text, int64_t *bytes);

/* ---- sections: structured subtrees handled by code ------------------------ */

/* A read-only YAML node handed to section handlers. It is valid only during
 * the handler call. */
typedef struct sp_cnode sp_cnode_t;
typedef enum sp_cnode_kind {
    SP_CNODE_SCALAR,
    SP_CNODE_LIST,
    SP_CNODE_MAP
} sp_cnode_kind_t;

sp_cnode_kind_t sp_cnode_kind(const sp_cnode_t *n);
/* The text of a scalar, NULL for a list or map. */
const char *sp_cnode_text(const sp_cnode_t *n);
/* Items of a list or entries of a map; 0 for a scalar. */
size_t sp_cnode_len(const sp_cnode_t *n);
/* The i-th item of a list, or the i-th value of a map (NULL past the end). */
const sp_cnode_t *sp_cnode_item(const sp_cnode_t *n, size_t i);
/* The i-th key of a map (NULL past the end or for a non-map), as text or
 * as a scalar node (for error locations). */
const char *sp_cnode_key(const sp_cnode_t *n, size_t i);
const sp_cnode_t *sp_cnode_key_node(const sp_cnode_t *n, size_t i);
/* The value of `key` in a map, or NULL. */
const sp_cnode_t *sp_cnode_get(const sp_cnode_t *n, const char *key);

/* Where section handlers report problems. */
typedef struct sp_config_report sp_config_report_t;
/* Record "FILE:LINE:COLUMN: message" for node `at` (NULL: no location).
 * Any report makes the whole load fail. */
void sp_config_error(sp_config_report_t *r, const sp_cnode_t *at,
                     const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A section owns every key under a dotted prefix that no declared variable
 * claims. If variables live under the prefix too, the section's node is a
 * map of the remaining keys (relative to the prefix, merged over files);
 * otherwise it is the prefix's node as written (a later file replaces it).
 *
 * On every sp_config_load*, check() gets the node (NULL when no file has
 * it) and either stores what apply() needs in *staged and returns 0, or
 * reports problems with sp_config_error() and returns -1. If the whole load
 * succeeds apply(staged) runs (it cannot fail), else discard(staged). Each
 * callback may be NULL; a section without check accepts anything. Sections
 * are read from files only, not from the environment or the command line. */
typedef struct sp_config_section_ops {
    int (*check)(const sp_cnode_t *node, sp_config_report_t *r, void **staged,
                 void *arg);
    void (*apply)(void *staged, void *arg);
    void (*discard)(void *staged, void *arg);
} sp_config_section_ops_t;

/* 0, -EINVAL (bad prefix), -EEXIST (clashes with a variable name or another
 * section), -ENOMEM. `ops` is copied; NULL means "accept and ignore" (an
 * open prefix: keys there are not errors). */
int sp_config_section(sp_config_t *cfg, const char *prefix,
                      const sp_config_section_ops_t *ops, void *arg);

#ifdef __cplusplus
}
#endif
#endif
