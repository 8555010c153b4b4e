/* Router: handlers by exact path, path prefix or glob, with method masks.
 *
 * Routes are few and fixed before the server starts, so they are plain
 * arrays searched in order: exact routes, prefixes longest first (kept
 * sorted as they are added), globs in the order added. The first route
 * that matches both path and method runs; routes matching the path alone
 * collect the methods named in the 405 answer's Allow header. */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

typedef struct route {
    char *pattern;
    size_t len;
    unsigned methods;
    sp_http_handler_fn fn;
    void *arg;
    bool owns_arg; /* arg is the router's to free (sp__http_router_add_owned) */
} route_t;

typedef struct route_list {
    route_t *v;
    size_t n, cap;
} route_list_t;

struct sp_http_router {
    route_list_t lists[3]; /* by sp_http_match_t */
    sp_http_handler_fn default_fn;
    void *default_arg;
};

sp_http_router_t *sp_http_router_create(void)
{
    sp_http_router_t *r = calloc(1, sizeof *r);
    if (!r)
        errno = ENOMEM;
    return r;
}

void sp_http_router_destroy(sp_http_router_t *r)
{
    if (!r)
        return;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < r->lists[k].n; i++) {
            free(r->lists[k].v[i].pattern);
            if (r->lists[k].v[i].owns_arg)
                free(r->lists[k].v[i].arg);
        }
        free(r->lists[k].v);
    }
    free(r);
}

/* Room for one more route at index `at` (the rest moves up). */
static route_t *insert_at(route_list_t *l, size_t at)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        route_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof *l->v);
    l->n++;
    return l->v + at;
}

int sp_http_router_add(sp_http_router_t *r, sp_http_match_t kind, const char *pattern,
                       unsigned methods, sp_http_handler_fn fn, void *arg)
{
    return sp__http_router_add_owned(r, kind, pattern, methods, fn, arg, false);
}

int sp__http_router_add_owned(sp_http_router_t *r, sp_http_match_t kind,
                              const char *pattern, unsigned methods,
                              sp_http_handler_fn fn, void *arg, bool owned)
{
    if (!r || !pattern || !fn || !methods || (unsigned)kind > SP_HTTP_GLOB)
        return -EINVAL;
    route_list_t *l = &r->lists[kind];
    size_t len = strlen(pattern), at = l->n;
    if (kind == SP_HTTP_PREFIX) {
        if (len > 1 && pattern[len - 1] == '/')
            len--; /* "/static/" means the same as "/static" */
        while (at && l->v[at - 1].len < len)
            at--; /* longest first */
    }
    char *copy = strndup(pattern, len);
    route_t *slot = copy ? insert_at(l, at) : NULL;
    if (!slot) {
        free(copy);
        return -ENOMEM;
    }
    *slot = (route_t){copy, len, methods, fn, arg, owned};
    return 0;
}

void sp_http_router_set_default(sp_http_router_t *r, sp_http_handler_fn fn, void *arg)
{
    r->default_fn = fn;
    r->default_arg = arg;
}

static bool path_matches(sp_http_match_t kind, const route_t *rt, const char *path)
{
    switch (kind) {
    case SP_HTTP_EXACT:
        return !strcmp(path, rt->pattern);
    case SP_HTTP_PREFIX:
        return !strncmp(path, rt->pattern, rt->len) &&
               (path[rt->len] == '\0' || path[rt->len] == '/' ||
                (rt->len == 1 && rt->pattern[0] == '/'));
    case SP_HTTP_GLOB:
        return fnmatch(rt->pattern, path, FNM_PATHNAME) == 0;
    }
    return false;
}

static const route_t *find(const sp_http_router_t *r, const char *path,
                           unsigned want, unsigned *allowed)
{
    for (int k = SP_HTTP_EXACT; k <= SP_HTTP_GLOB; k++)
        for (size_t i = 0; i < r->lists[k].n; i++) {
            const route_t *rt = &r->lists[k].v[i];
            if (!path_matches((sp_http_match_t)k, rt, path))
                continue;
            if (rt->methods & want)
                return rt;
            *allowed |= rt->methods;
        }
    return NULL;
}

/* "GET, HEAD, POST" for a method mask; HEAD comes with GET. */
static void allow_list(unsigned methods, char *out, size_t size)
{
    if (methods & SP_HTTP_M_GET)
        methods |= SP_HTTP_M_HEAD;
    size_t n = 0;
    out[0] = '\0';
    for (int m = SP_HTTP_GET; m < SP_HTTP_OTHER && n + 12 < size; m++)
        if (methods & SP_HTTP_M(m)) {
            const char *name = sp_http_method_name((sp_http_method_t)m);
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", name);
        }
}

int sp_http_router_dispatch(sp_http_request_t *req, sp_http_response_t *res, void *router)
{
    const sp_http_router_t *r = router;
    sp_http_method_t m = req->method;
    unsigned want = SP_HTTP_M(m) | (m == SP_HTTP_HEAD ? SP_HTTP_M_GET : 0);
    unsigned allowed = 0;
    const route_t *rt = find(r, sp__http_req_str(req, req->path), want, &allowed);
    if (rt)
        return rt->fn(req, res, rt->arg);
    if (allowed) {
        char allow[128];
        allow_list(allowed, allow, sizeof allow);
        return sp_http_response_error(res, 405, "Allow", allow);
    }
    if (r->default_fn)
        return r->default_fn(req, res, r->default_arg);
    return sp_http_response_error(res, 404, NULL, NULL);
}
