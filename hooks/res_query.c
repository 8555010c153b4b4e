/* DNS queries (res_query, res_search, res_querydomain and their res_n*
 * forms) run on a helper thread (lookup.h) with a resolver state of the
 * helper's own: a state is not safe to share between threads, and the
 * caller's may be gone when an interrupted query finishes. The caller's
 * settings (options, timeouts, IPv4 name servers, ndots, search list) are
 * copied into it, so a program that points _res or its own state at a
 * server queries that server. The answer is copied back into the caller's
 * buffer; h_errno and the state's res_h_errno are set as glibc sets them. */
#include <errno.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lookup.h"

enum { DO_QUERY, DO_SEARCH, DO_DOMAIN };

static void settings_take(sp__res_settings_t *s, const struct __res_state *st)
{
    if (!(st->options & RES_INIT))
        return; /* never initialised: the helper's defaults are the same */
    s->set = true;
    s->options = st->options;
    s->retrans = st->retrans;
    s->retry = st->retry;
    s->ndots = st->ndots;
    s->nscount = st->nscount < MAXNS ? st->nscount : MAXNS;
    memcpy(s->ns, st->nsaddr_list, sizeof s->ns);
    while (s->nsearch < MAXDNSRCH && st->dnsrch[s->nsearch]) {
        snprintf(s->search[s->nsearch], sizeof s->search[0], "%s", st->dnsrch[s->nsearch]);
        s->nsearch++;
    }
}

/* Into st, just initialised on the helper. The search list's strings go
 * into st's defdname, where res_ninit keeps its own. */
static void settings_give(const sp__res_settings_t *s, struct __res_state *st)
{
    if (!s->set)
        return;
    st->options = s->options;
    st->retrans = s->retrans;
    st->retry = s->retry;
    st->ndots = (unsigned)s->ndots & 15;
    st->nscount = s->nscount;
    memcpy(st->nsaddr_list, s->ns, sizeof s->ns);
    char *at = st->defdname, *end = st->defdname + sizeof st->defdname;
    int i = 0;
    for (size_t n; i < s->nsearch && (n = strlen(s->search[i]) + 1) <= (size_t)(end - at);
         i++, at += n)
        st->dnsrch[i] = memcpy(at, s->search[i], n);
    st->dnsrch[i] = NULL;
}

static void run_query(sp__job_t *j)
{
    sp__lookup_t *l = (sp__lookup_t *)j;
    const sp__real_t *r = sp__real();
    struct __res_state st;
    memset(&st, 0, sizeof st);
    if (res_ninit(&st) != 0) {
        l->ret = -1;
        l->herr = NETDB_INTERNAL;
        l->err = errno;
        return;
    }
    settings_give(&l->settings, &st);
    if (l->flags == DO_QUERY)
        l->ret = r->res_nquery(&st, l->name, l->cls, l->type, l->answer, l->anslen);
    else if (l->flags == DO_SEARCH)
        l->ret = r->res_nsearch(&st, l->name, l->cls, l->type, l->answer, l->anslen);
    else
        l->ret = r->res_nquerydomain(&st, l->name, l->service, l->cls, l->type, l->answer,
                                     l->anslen);
    l->err = errno;
    l->herr = st.res_h_errno;
    res_nclose(&st);
}

/* A record for the query, or NULL if out of memory (or a bad length). */
static sp__lookup_t *query_new(const struct __res_state *caller, int which, const char *name,
                               const char *domain, int cls, int type, int anslen)
{
    sp__lookup_t *l = anslen >= 0 && name ? sp__lookup_new(run_query) : NULL;
    if (!l)
        return NULL;
    l->flags = which;
    l->cls = cls;
    l->type = type;
    l->anslen = anslen;
    settings_take(&l->settings, caller);
    if (!(l->name = strdup(name)) || (domain && !(l->service = strdup(domain))) ||
        !(l->answer = malloc(anslen ? (size_t)anslen : 1))) {
        sp__lookup_free(l);
        return NULL;
    }
    return l;
}

static int query(const sp__hook_bridge_t *b, struct __res_state *caller, int which,
                 const char *name, const char *domain, int cls, int type,
                 unsigned char *answer, int anslen)
{
    sp__lookup_t *l = query_new(caller, which, name, domain, cls, type, anslen);
    int ret = -1, herr = NETDB_INTERNAL, err = ENOMEM;
    if (l && sp__lookup_run(b, l) < 0) {
        err = errno; /* l is given up */
    } else if (l) {
        ret = l->ret;
        herr = l->herr;
        err = l->err;
        if (ret > 0)
            memcpy(answer, l->answer, (size_t)(ret < anslen ? ret : anslen));
        sp__lookup_unref(l);
    }
    caller->res_h_errno = herr;
    h_errno = herr;
    errno = err;
    return ret;
}

int res_nquery(res_state st, const char *dname, int cls, int type, unsigned char *answer,
               int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_nquery(st, dname, cls, type, answer, anslen);
    return query(b, st, DO_QUERY, dname, NULL, cls, type, answer, anslen);
}

int res_nsearch(res_state st, const char *dname, int cls, int type, unsigned char *answer,
                int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_nsearch(st, dname, cls, type, answer, anslen);
    return query(b, st, DO_SEARCH, dname, NULL, cls, type, answer, anslen);
}

int res_nquerydomain(res_state st, const char *name, const char *domain, int cls, int type,
                     unsigned char *answer, int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_nquerydomain(st, name, domain, cls, type, answer, anslen);
    return query(b, st, DO_DOMAIN, name, domain, cls, type, answer, anslen);
}

int res_query(const char *dname, int cls, int type, unsigned char *answer, int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_query(dname, cls, type, answer, anslen);
    return query(b, &_res, DO_QUERY, dname, NULL, cls, type, answer, anslen);
}

int res_search(const char *dname, int cls, int type, unsigned char *answer, int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_search(dname, cls, type, answer, anslen);
    return query(b, &_res, DO_SEARCH, dname, NULL, cls, type, answer, anslen);
}

int res_querydomain(const char *name, const char *domain, int cls, int type,
                    unsigned char *answer, int anslen)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->res_querydomain(name, domain, cls, type, answer, anslen);
    return query(b, &_res, DO_DOMAIN, name, domain, cls, type, answer, anslen);
}
