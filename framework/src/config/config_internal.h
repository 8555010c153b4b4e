/* Internal: the configuration registry, shared by config*.c.
 *
 * config.c        registry, names, declarations, sections
 * config_var.c    publication, getters, checks, listeners, commit
 * config_value.c  value types: parse from text or YAML node, format, compare
 * config_units.c  durations and sizes
 * config_yaml.c   YAML -> node tree (libyaml), node accessors, error report
 * config_load.c   load transactions; YAML files
 * config_cli.c    loads from the environment and the command line
 * config_print.c  --print-config
 */
#ifndef SP_CONFIG_INTERNAL_H
#define SP_CONFIG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "spindle/config.h"

/* Value sources above the default, lowest precedence first. */
enum { SRC_FILE, SRC_ENV, SRC_CLI, SRC_COUNT };

/* One source's value of a variable; `val`'s pointers and `where` are owned
 * until retired. */
typedef struct sp__cslot {
    bool set;
    sp_cvalue_t val;
    char *where;
} sp__cslot_t;

typedef struct sp__clistener {
    sp_cvar_listener_fn fn;
    void *arg;
} sp__clistener_t;

struct sp_cvar {
    sp_config_t *cfg;
    char *name, *desc, *env;
    sp_cvar_type_t type;
    int64_t imin, imax; /* INT, DURATION, SIZE */
    double fmin, fmax;  /* FLOAT */
    sp_cvar_check_fn check;
    void *check_arg;
    sp__clistener_t *listeners;
    size_t nlisteners;
    sp_cvalue_t def;
    sp__cslot_t src[SRC_COUNT];
    /* The published value: scalars in `bits`, the rest in `ptr`; readers
     * load them without a lock. */
    _Atomic uint64_t bits;
    _Atomic(void *) ptr;
    _Atomic(const char *) source;
};

typedef struct sp__csection {
    char *prefix;
    sp_config_section_ops_t ops;
    bool has_ops;
    void *arg;
    bool has_vars; /* some variable lives under the prefix */
} sp__csection_t;

typedef struct sp__cchange {
    sp_cvar_t *v;
    sp_cvalue_t old;
} sp__cchange_t;

struct sp_config {
    pthread_mutex_t lock; /* declarations and loads */
    sp_cvar_t **vars;
    size_t nvars, capvars;
    sp__cchange_t *changes; /* commit's scratch, one per variable */
    size_t capchanges;
    sp__csection_t *sections;
    size_t nsections, capsections;
    /* Published objects replaced by a load: freed only by destroy(), so
     * readers may keep using what a getter returned. */
    void **retired;
    size_t nretired, capretired;
};

/* ---- growable arrays ---------------------------------------------------- */

/* `arr` (of *cap elements of size sz) with room for element n: arr itself,
 * a reallocated array (*cap updated), or NULL with arr untouched. */
void *sp__grow(void *arr, size_t *cap, size_t n, size_t sz);

/* ---- reports (config_yaml.c) -------------------------------------------- */

struct sp_config_report {
    char *text;
    size_t len, cap;
    unsigned count;
    bool oom;
};

/* Record "where: message" (where may be NULL). */
void sp__report(sp_config_report_t *r, const char *where, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Hand the text to *errors (or free it); returns rc unchanged. */
int sp__report_finish(sp_config_report_t *r, int rc, char **errors);

/* ---- node trees (config_yaml.c) ----------------------------------------- */

/* Bump allocator for one load's nodes and strings, freed in one go. */
typedef struct sp__arena {
    struct sp__arena_chunk *chunks;
} sp__arena_t;

void *sp__arena_alloc(sp__arena_t *a, size_t size);
char *sp__arena_strdup(sp__arena_t *a, const char *s, size_t len);
void sp__arena_free(sp__arena_t *a);

struct sp_cnode {
    sp_cnode_kind_t kind;
    bool plain; /* an unquoted scalar: "", "~" and "null" mean null */
    const char *file;
    unsigned line, col; /* 1-based */
    const char *text;   /* SCALAR */
    size_t n;
    const sp_cnode_t **keys;  /* MAP: scalar key nodes */
    const sp_cnode_t **items; /* LIST items, MAP values */
};

/* Parse a YAML document into a tree. On malformed YAML, report it and
 * return -EINVAL; -ENOMEM. *root is NULL for an empty document. */
int sp__yaml_parse(sp__arena_t *a, const char *file, const char *text,
                   size_t len, const sp_cnode_t **root, sp_config_report_t *r);
/* "file:line:col" of a node, in a static-free caller buffer. */
void sp__node_where(const sp_cnode_t *n, char *buf, size_t len);
/* A plain null scalar ("", "~", "null"): the key counts as not set. */
bool sp__node_is_null(const sp_cnode_t *n);
/* A new map node in the arena with room for `cap` entries. */
sp_cnode_t *sp__node_map(sp__arena_t *a, const sp_cnode_t *at, size_t cap);

/* ---- units (config_units.c) --------------------------------------------- */

/* Canonical text of a duration (microseconds) or a size (bytes), like
 * snprintf. */
int sp__units_format(int64_t v, bool size, char *buf, size_t len);

/* ---- values (config_value.c) -------------------------------------------- */

bool sp__type_is_scalar(sp_cvar_type_t t); /* stored in `bits` */
const char *sp__type_name(sp_cvar_type_t t);

/* Parse `text` (from env, cli or a scalar node) as a value of v's type,
 * checking bounds and v's check. On error writes the reason to msg and
 * returns -1. */
int sp__value_from_text(const sp_cvar_t *v, const char *text, sp_cvalue_t *out,
                        char *msg, size_t len);
/* The same from a YAML node (a sequence for lists, a mapping for maps);
 * *at is set to the node the error is about. */
int sp__value_from_node(const sp_cvar_t *v, const sp_cnode_t *n,
                        sp_cvalue_t *out, const sp_cnode_t **at, char *msg,
                        size_t len);
/* Parse a default or bound written in config syntax, without bounds. */
int sp__value_parse(sp_cvar_type_t t, const char *text, sp_cvalue_t *out,
                    char *msg, size_t len);
/* Check bounds and the variable's check function. */
int sp__value_check(const sp_cvar_t *v, const sp_cvalue_t *val, char *msg,
                    size_t len);
/* Deep copies of C defaults. */
int sp__value_list(const char *const *items, size_t n, sp_cvalue_t *out);
int sp__value_map(const char *const *kv, size_t n, sp_cvalue_t *out);
int sp__value_string(const char *s, sp_cvalue_t *out);
bool sp__value_equal(const sp_cvalue_t *a, const sp_cvalue_t *b);
/* The owned heap object of a value (string, list or map), or NULL. */
void *sp__value_object(const sp_cvalue_t *v);
void sp__value_free(sp_cvalue_t *v);
/* Canonical text ("5s", "4MiB", "[a, b]"), YAML-quoted when needed, into
 * buf (truncated to len > 0). Returns the full length, like snprintf. */
size_t sp__value_format(const sp_cvalue_t *v, char *buf, size_t len);

/* ---- load transactions (config_load.c) ---------------------------------- */

/* A section's subtree: the node written at its prefix when that is not a
 * mapping (`whole`), else the merged entries of every file. */
typedef struct sp__sec_stage {
    const sp_cnode_t *whole;
    const sp_cnode_t **keys, **vals;
    size_t n, cap;
    void *staged;
    bool checked; /* check() succeeded: apply or discard owns `staged` */
} sp__sec_stage_t;

typedef struct sp__txn {
    sp_config_t *cfg;
    int src;
    bool replace;               /* replace the source, or patch it (cli) */
    sp__cslot_t *slots;          /* staged value per variable ... */
    bool *touched;              /* ... when touched */
    const sp_cnode_t **first;   /* the key that set it, for "set twice" */
    sp__sec_stage_t *secs;
    sp__arena_t arena;
    sp_config_report_t report;
} sp__txn_t;

/* Start a transaction over source `src` (replacing it, or patching it),
 * with the registry locked; sp__txn_finish() unlocks. 0 or -ENOMEM (then
 * already finished). */
int sp__txn_open(sp__txn_t *t, sp_config_t **cfg, int src, bool replace,
                 char **errors);
/* Apply the staged values if rc is 0 and nothing was reported, else drop
 * them; unlock; hand the report to *errors. Returns the load's result. */
int sp__txn_finish(sp__txn_t *t, int rc, char **errors);
/* Stage variable i's value from text; problems are reported as `what`. */
void sp__stage_text(sp__txn_t *t, size_t i, const char *text, const char *where,
                    const char *what);

/* ---- registry (config.c, config_var.c) ---------------------------------- */

sp_config_t *sp__config(sp_config_t *cfg); /* NULL -> the global one */
/* Make `val` (owned by a slot or the default) v's value for readers. */
void sp__cvar_publish(sp_cvar_t *v, const sp_cvalue_t *val, const char *source);
/* Recompute every variable's value from its sources, publish it, then call
 * the listeners of those that changed. Called with cfg->lock held;
 * listeners run with it held too. */
void sp__config_commit(sp_config_t *cfg);
/* Keep a replaced object until destroy. -ENOMEM only if it cannot be kept,
 * in which case it is leaked rather than freed under a reader. */
void sp__config_retire(sp_config_t *cfg, void *obj);
/* The section whose prefix `name` is at or under, or NULL. */
sp__csection_t *sp__config_section_of(sp_config_t *cfg, const char *name);
/* Whether `prefix` + "." begins some variable's name. */
bool sp__config_is_var_prefix(sp_config_t *cfg, const char *prefix);
/* Variable index by exact name, or -1. */
long sp__config_index(sp_config_t *cfg, const char *name);

#endif
