/* YAML to node trees with libyaml's document loader, plus the node
 * accessors and the error report shared by every load.
 *
 * Nodes carry their file and 1-based line and column so any later check
 * can say exactly where a value was written. A load's nodes live in one
 * arena. Aliases are expanded into copies; a node budget per file stops
 * "billion laughs" documents and a depth limit stops runaway nesting. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"

enum {
    CHUNK_MIN = 16 * 1024,
    MAX_DEPTH = 64,
    MAX_NODES = 1 << 20, /* per file, counting alias copies */
};

/* ---- arena -------------------------------------------------------------- */

typedef struct sp__arena_chunk {
    struct sp__arena_chunk *next;
    size_t used, size;
    _Alignas(max_align_t) unsigned char data[];
} chunk_t;

void *sp__arena_alloc(sp__arena_t *a, size_t size)
{
    size = (size + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    chunk_t *c = a->chunks;
    if (!c || c->size - c->used < size) {
        size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->size = cap;
        c->used = 0;
        c->next = a->chunks;
        a->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

char *sp__arena_strdup(sp__arena_t *a, const char *s, size_t len)
{
    char *p = sp__arena_alloc(a, len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

void sp__arena_free(sp__arena_t *a)
{
    while (a->chunks) {
        chunk_t *next = a->chunks->next;
        free(a->chunks);
        a->chunks = next;
    }
}

/* ---- reports ------------------------------------------------------------ */

static void report_append(sp_config_report_t *r, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0 || r->oom) {
        va_end(again);
        return;
    }
    if (r->len + (size_t)n + 2 > r->cap) {
        size_t cap = (r->len + (size_t)n + 2) * 2;
        char *t = realloc(r->text, cap);
        if (!t) {
            r->oom = true;
            va_end(again);
            return;
        }
        r->text = t;
        r->cap = cap;
    }
    vsnprintf(r->text + r->len, (size_t)n + 1, fmt, again);
    r->len += (size_t)n;
    va_end(again);
}

static void report_raw(sp_config_report_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_append(r, fmt, ap);
    va_end(ap);
}

static void report_v(sp_config_report_t *r, const char *where, const char *fmt,
                     va_list ap)
{
    if (where)
        report_raw(r, "%s: ", where);
    report_append(r, fmt, ap);
    report_raw(r, "\n");
    r->count++;
}

void sp__report(sp_config_report_t *r, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_v(r, where, fmt, ap);
    va_end(ap);
}

void sp_config_error(sp_config_report_t *r, const sp_cnode_t *at,
                     const char *fmt, ...)
{
    char where[512];
    if (at)
        sp__node_where(at, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    report_v(r, at ? where : NULL, fmt, ap);
    va_end(ap);
}

int sp__report_finish(sp_config_report_t *r, int rc, char **errors)
{
    if (errors && rc < 0 && r->oom && !r->text)
        r->text = strdup("out of memory\n");
    if (errors && rc < 0)
        *errors = r->text;
    else {
        free(r->text);
        if (errors)
            *errors = NULL;
    }
    r->text = NULL;
    r->len = r->cap = 0;
    return rc;
}

/* ---- nodes -------------------------------------------------------------- */

void sp__node_where(const sp_cnode_t *n, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%u:%u", n->file, n->line, n->col);
}

bool sp__node_is_null(const sp_cnode_t *n)
{
    if (n->kind != SP_CNODE_SCALAR || !n->plain)
        return false;
    const char *t = n->text;
    return !*t || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 ||
           strcmp(t, "Null") == 0 || strcmp(t, "NULL") == 0;
}

static sp_cnode_t *node_new(sp__arena_t *a, sp_cnode_kind_t kind, const char *file,
                            unsigned line, unsigned col, size_t n)
{
    sp_cnode_t *nd = sp__arena_alloc(a, sizeof *nd);
    if (!nd)
        return NULL;
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->file = file;
    nd->line = line;
    nd->col = col;
    if (n) {
        nd->items = sp__arena_alloc(a, n * sizeof *nd->items);
        nd->keys = kind == SP_CNODE_MAP ? sp__arena_alloc(a, n * sizeof *nd->keys) : NULL;
        if (!nd->items || (kind == SP_CNODE_MAP && !nd->keys))
            return NULL;
    }
    return nd;
}

sp_cnode_t *sp__node_map(sp__arena_t *a, const sp_cnode_t *at, size_t cap)
{
    return node_new(a, SP_CNODE_MAP, at->file, at->line, at->col, cap);
}

sp_cnode_kind_t sp_cnode_kind(const sp_cnode_t *n)
{
    return n->kind;
}

const char *sp_cnode_text(const sp_cnode_t *n)
{
    return n && n->kind == SP_CNODE_SCALAR ? n->text : NULL;
}

size_t sp_cnode_len(const sp_cnode_t *n)
{
    return n ? n->n : 0;
}

const sp_cnode_t *sp_cnode_item(const sp_cnode_t *n, size_t i)
{
    return n && i < n->n ? n->items[i] : NULL;
}

const sp_cnode_t *sp_cnode_key_node(const sp_cnode_t *n, size_t i)
{
    return n && n->kind == SP_CNODE_MAP && i < n->n ? n->keys[i] : NULL;
}

const char *sp_cnode_key(const sp_cnode_t *n, size_t i)
{
    const sp_cnode_t *k = sp_cnode_key_node(n, i);
    return k ? k->text : NULL;
}

const sp_cnode_t *sp_cnode_get(const sp_cnode_t *n, const char *key)
{
    for (size_t i = 0; n && n->kind == SP_CNODE_MAP && i < n->n; i++)
        if (strcmp(n->keys[i]->text, key) == 0)
            return n->items[i];
    return NULL;
}

/* ---- libyaml document -> nodes ------------------------------------------ */

/* One document's conversion. The node budget is the document's own, so
 * one alias bomb in a directory does not fail the files after it. */
typedef struct conv {
    sp__arena_t *a;
    yaml_document_t *doc;
    const char *file;
    sp_config_report_t *r;
    size_t nodes; /* made so far, alias copies included */
} conv_t;

static const sp_cnode_t *convert(conv_t *c, yaml_node_t *y, int depth);

/* Keys in order of text, then position. */
static int by_key(const void *a, const void *b)
{
    const sp_cnode_t *x = *(const sp_cnode_t *const *)a, *y = *(const sp_cnode_t *const *)b;
    int d = strcmp(x->text, y->text);
    if (d == 0)
        d = x->line != y->line ? (x->line < y->line ? -1 : 1)
                               : (x->col > y->col) - (x->col < y->col);
    return d;
}

/* YAML keys are unique within a mapping (libyaml does not check): report
 * each repeat where it stands. Sorting keeps this O(n log n). */
static bool unique_keys(conv_t *c, const sp_cnode_t *map)
{
    if (map->n < 2)
        return true;
    const sp_cnode_t **k = malloc(map->n * sizeof *k);
    if (!k) {
        c->r->oom = true;
        return false;
    }
    memcpy(k, map->keys, map->n * sizeof *k);
    qsort(k, map->n, sizeof *k, by_key);
    bool ok = true;
    for (size_t i = 1; i < map->n; i++)
        if (strcmp(k[i]->text, k[i - 1]->text) == 0) {
            sp_config_error(c->r, k[i], "duplicate key '%s' (also at line %u)", k[i]->text,
                            k[i - 1]->line);
            ok = false;
        }
    free(k);
    return ok;
}

static bool convert_items(conv_t *c, sp_cnode_t *nd, yaml_node_t *y, int depth)
{
    if (y->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = y->data.sequence.items.start;
             it < y->data.sequence.items.top; it++)
            if (!(nd->items[nd->n++] =
                      convert(c, yaml_document_get_node(c->doc, *it), depth + 1)))
                return false;
        return true;
    }
    for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top;
         p++) {
        const sp_cnode_t *k = convert(c, yaml_document_get_node(c->doc, p->key), depth + 1);
        if (!k)
            return false;
        if (k->kind != SP_CNODE_SCALAR) {
            sp_config_error(c->r, k, "mapping keys must be scalars");
            return false;
        }
        nd->keys[nd->n] = k;
        if (!(nd->items[nd->n++] =
                  convert(c, yaml_document_get_node(c->doc, p->value), depth + 1)))
            return false;
    }
    return unique_keys(c, nd);
}

static const sp_cnode_t *convert(conv_t *c, yaml_node_t *y, int depth)
{
    unsigned line = (unsigned)y->start_mark.line + 1, col = (unsigned)y->start_mark.column + 1;
    if (depth > MAX_DEPTH || ++c->nodes > MAX_NODES) {
        sp__report(c->r, NULL, "%s:%u:%u: %s", c->file, line, col,
                   depth > MAX_DEPTH ? "nested too deeply" : "too many nodes (alias expansion?)");
        return NULL;
    }
    size_t n = 0;
    sp_cnode_kind_t kind = SP_CNODE_SCALAR;
    if (y->type == YAML_SEQUENCE_NODE) {
        kind = SP_CNODE_LIST;
        n = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
    } else if (y->type == YAML_MAPPING_NODE) {
        kind = SP_CNODE_MAP;
        n = (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
    }
    sp_cnode_t *nd = node_new(c->a, kind, c->file, line, col, n);
    if (!nd) {
        c->r->oom = true;
        return NULL;
    }
    if (kind != SP_CNODE_SCALAR)
        return convert_items(c, nd, y, depth) ? nd : NULL;
    nd->plain = y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    nd->text = sp__arena_strdup(c->a, (const char *)y->data.scalar.value,
                                y->data.scalar.length);
    if (!nd->text)
        c->r->oom = true;
    return nd->text ? nd : NULL;
}

/* Line and column of a byte offset, for reader errors (bad UTF-8), which
 * libyaml reports by offset only. */
static void offset_mark(const char *text, size_t len, size_t off, yaml_mark_t *m)
{
    m->line = m->column = 0;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            m->line++;
            m->column = 0;
        } else {
            m->column++;
        }
    }
}

static void report_parser(const yaml_parser_t *p, const char *file,
                          const char *text, size_t len, sp_config_report_t *r)
{
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR)
        offset_mark(text, len, p->problem_offset, &m);
    if (p->error == YAML_MEMORY_ERROR) {
        r->oom = true;
        return;
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->context)
        sp__report(r, NULL, "%s:%zu:%zu: %s (%s at %zu:%zu)", file, m.line + 1,
                   m.column + 1, problem, p->context, p->context_mark.line + 1,
                   p->context_mark.column + 1);
    else
        sp__report(r, NULL, "%s:%zu:%zu: %s", file, m.line + 1, m.column + 1, problem);
}

/* Load the next document: 1 with one, 0 at the end of the stream, -1 on a
 * YAML error (reported). */
static int load_doc(yaml_parser_t *p, yaml_document_t *doc, const char *file,
                    const char *text, size_t len, sp_config_report_t *r)
{
    if (!yaml_parser_load(p, doc)) {
        report_parser(p, file, text, len, r);
        return -1;
    }
    if (yaml_document_get_root_node(doc))
        return 1;
    yaml_document_delete(doc);
    return 0;
}

int sp__yaml_parse(sp__arena_t *a, const char *file, const char *text, size_t len,
                   const sp_cnode_t **root, sp_config_report_t *r)
{
    yaml_parser_t p;
    yaml_document_t doc;
    *root = NULL;
    if (!yaml_parser_initialize(&p))
        return -ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    unsigned before = r->count;
    int got = load_doc(&p, &doc, file, text, len, r);
    if (got == 1) {
        conv_t c = {a, &doc, file, r, 0};
        *root = convert(&c, yaml_document_get_root_node(&doc), 0);
        yaml_document_delete(&doc);
        /* One document per file: a second one is almost surely a mistake. */
        if (*root && (got = load_doc(&p, &doc, file, text, len, r)) == 1) {
            yaml_node_t *extra = yaml_document_get_root_node(&doc);
            sp__report(r, NULL, "%s:%zu:%zu: only one YAML document per file", file,
                       extra->start_mark.line + 1, extra->start_mark.column + 1);
            yaml_document_delete(&doc);
        }
    }
    yaml_parser_delete(&p);
    if (r->oom)
        return -ENOMEM;
    return r->count == before ? 0 : -EINVAL;
}
