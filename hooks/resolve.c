/* Host lookups (getaddrinfo, gethostbyname..., getnameinfo) run on a
 * helper thread (lookup.h): resolver state is per thread there, and a slow
 * DNS answer never stalls a worker. The non-reentrant calls
 * (gethostbyname...) answer from their record, which the calling fiber
 * keeps until its next such call or its end (never a buffer another fiber
 * could overwrite); the others copy into the caller's buffers. */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "lookup.h"

void sp__lookup_free(sp__lookup_t *l)
{
    if (l->ai)
        freeaddrinfo(l->ai); /* an answer nobody took */
    free(l->name);
    free(l->service);
    free(l->answer);
    free(l);
}

static void lookup_free(sp__job_t *j)
{
    sp__lookup_free((sp__lookup_t *)j);
}

sp__lookup_t *sp__lookup_new(void (*run)(sp__job_t *j))
{
    sp__lookup_t *l = calloc(1, sizeof *l);
    if (l) {
        l->job.run = run;
        l->job.free = lookup_free;
    }
    return l;
}

static void run_addr_info(sp__job_t *j)
{
    sp__lookup_t *l = (sp__lookup_t *)j;
    l->ret = sp__real()->getaddrinfo(l->name, l->service, l->has_hints ? &l->hints : NULL,
                                     &l->ai);
    l->err = errno;
    if (l->ret != 0)
        l->ai = NULL;
}

static void run_by_name(sp__job_t *j)
{
    sp__lookup_t *l = (sp__lookup_t *)j;
    l->ret = sp__real()->gethostbyname2_r(l->name, l->af, &l->he, l->buf, sizeof l->buf,
                                          &l->res, &l->herr);
}

static void run_by_addr(sp__job_t *j)
{
    sp__lookup_t *l = (sp__lookup_t *)j;
    l->ret = sp__real()->gethostbyaddr_r(l->addr, l->addrlen, l->af, &l->he, l->buf,
                                         sizeof l->buf, &l->res, &l->herr);
}

static void run_name_info(sp__job_t *j)
{
    sp__lookup_t *l = (sp__lookup_t *)j;
    l->ret = sp__real()->getnameinfo((struct sockaddr *)&l->sa, l->salen,
                                     l->want_host ? l->host : NULL, sizeof l->host,
                                     l->want_serv ? l->serv : NULL, sizeof l->serv,
                                     l->flags);
}

/* A lookup of name in family af; NULL if out of memory. */
static sp__lookup_t *by_name(const char *name, int af)
{
    sp__lookup_t *l = sp__lookup_new(run_by_name);
    if (l && !(l->name = strdup(name))) {
        free(l);
        return NULL;
    }
    if (l)
        l->af = af;
    return l;
}

static void kept_free(void *p)
{
    sp__lookup_free(p);
}

/* A non-reentrant call's answer: kept by the fiber, or NULL with h_errno. */
static struct hostent *kept_answer(const sp__hook_bridge_t *b, sp__lookup_t *l)
{
    if (!l || sp__lookup_run(b, l) < 0) {
        h_errno = NETDB_INTERNAL;
        return NULL;
    }
    h_errno = l->herr;
    struct hostent *res = l->ret == 0 ? l->res : NULL;
    b->fiber_keep(l, kept_free); /* the reference the caller held */
    return res;
}

struct hostent *gethostbyname2(const char *name, int af)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->gethostbyname2(name, af);
    return kept_answer(b, by_name(name, af));
}

struct hostent *gethostbyname(const char *name)
{
    if (!sp__hook_active())
        return sp__real()->gethostbyname(name);
    return gethostbyname2(name, AF_INET);
}

/* A lookup of addr[len] in family type; NULL if out of memory. */
static sp__lookup_t *by_addr(const void *addr, socklen_t len, int type)
{
    sp__lookup_t *l = sp__lookup_new(run_by_addr);
    if (l) {
        memcpy(l->addr, addr, len);
        l->addrlen = len;
        l->af = type;
    }
    return l;
}

struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || len > sizeof ((sp__lookup_t *)0)->addr)
        return sp__real()->gethostbyaddr(addr, len, type);
    return kept_answer(b, by_addr(addr, len, type));
}

/* Copy `from` into `to`, its lists and strings into buf[len] (the caller's
 * buffer of a _r call). 0, or ERANGE when buf is too small, as glibc. */
static int hostent_copy(const struct hostent *from, struct hostent *to, char *buf,
                        size_t len)
{
    size_t naliases = 0, naddrs = 0, strings = strlen(from->h_name) + 1;
    while (from->h_aliases[naliases])
        strings += strlen(from->h_aliases[naliases++]) + 1;
    while (from->h_addr_list[naddrs])
        naddrs++;
    size_t pad = (sizeof(char *) - (uintptr_t)buf % sizeof(char *)) % sizeof(char *);
    size_t ptrs = (naliases + naddrs + 2) * sizeof(char *);
    if (pad + ptrs + naddrs * (size_t)from->h_length + strings > len)
        return ERANGE;
    char **p = (char **)(void *)(buf + pad);
    char *data = (char *)(p + naliases + naddrs + 2);
    *to = *from;
    to->h_aliases = p;
    to->h_addr_list = p + naliases + 1;
    for (size_t i = 0; i < naddrs; i++, data += from->h_length)
        to->h_addr_list[i] = memcpy(data, from->h_addr_list[i], (size_t)from->h_length);
    to->h_addr_list[naddrs] = NULL;
    for (size_t i = 0; i < naliases; i++, data += strlen(data) + 1)
        to->h_aliases[i] = strcpy(data, from->h_aliases[i]);
    to->h_aliases[naliases] = NULL;
    to->h_name = strcpy(data, from->h_name);
    return 0;
}

/* A _r call's answer from l, copied into the caller's ret and buf. */
static int answer_r(const sp__hook_bridge_t *b, sp__lookup_t *l, struct hostent *ret,
                    char *buf, size_t buflen, struct hostent **result, int *h_errnop)
{
    *result = NULL;
    *h_errnop = NETDB_INTERNAL;
    if (!l)
        return ENOMEM;
    if (sp__lookup_run(b, l) < 0) /* l is given up */
        return errno;
    *h_errnop = l->herr;
    int rc = l->ret;
    if (rc == 0 && l->res && (rc = hostent_copy(l->res, ret, buf, buflen)) == 0)
        *result = ret;
    sp__lookup_unref(l);
    return rc;
}

int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
                     struct hostent **result, int *h_errnop)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop);
    return answer_r(b, by_name(name, af), ret, buf, buflen, result, h_errnop);
}

int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                    struct hostent **result, int *h_errnop)
{
    if (!sp__hook_active())
        return sp__real()->gethostbyname_r(name, ret, buf, buflen, result, h_errnop);
    return gethostbyname2_r(name, AF_INET, ret, buf, buflen, result, h_errnop);
}

int gethostbyaddr_r(const void *addr, socklen_t len, int type, struct hostent *ret,
                    char *buf, size_t buflen, struct hostent **result, int *h_errnop)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || len > sizeof ((sp__lookup_t *)0)->addr)
        return sp__real()->gethostbyaddr_r(addr, len, type, ret, buf, buflen, result,
                                           h_errnop);
    return answer_r(b, by_addr(addr, len, type), ret, buf, buflen, result, h_errnop);
}

int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                char *serv, socklen_t servlen, int flags)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || salen > sizeof(struct sockaddr_storage))
        return sp__real()->getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
    sp__lookup_t *l = sp__lookup_new(run_name_info);
    if (!l)
        return EAI_MEMORY;
    memcpy(&l->sa, sa, salen);
    l->salen = salen;
    l->flags = flags;
    l->want_host = host && hostlen;
    l->want_serv = serv && servlen;
    if (sp__lookup_run(b, l) < 0)
        return EAI_SYSTEM;
    int rc = l->ret;
    if (rc == 0 && ((l->want_host && strlen(l->host) >= hostlen) ||
                    (l->want_serv && strlen(l->serv) >= servlen)))
        rc = EAI_OVERFLOW;
    if (rc == 0 && l->want_host)
        strcpy(host, l->host);
    if (rc == 0 && l->want_serv)
        strcpy(serv, l->serv);
    sp__lookup_unref(l);
    return rc;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->getaddrinfo(node, service, hints, res);
    sp__lookup_t *l = sp__lookup_new(run_addr_info);
    if (l && ((node && !(l->name = strdup(node))) ||
              (service && !(l->service = strdup(service))))) {
        sp__lookup_free(l);
        l = NULL;
    }
    if (!l)
        return EAI_MEMORY;
    if (hints) { /* the lookup reads only the flags, family, type, protocol */
        l->hints = (struct addrinfo){.ai_flags = hints->ai_flags,
                                     .ai_family = hints->ai_family,
                                     .ai_socktype = hints->ai_socktype,
                                     .ai_protocol = hints->ai_protocol};
        l->has_hints = true;
    }
    if (sp__lookup_run(b, l) < 0)
        return EAI_SYSTEM;
    int ret = l->ret;
    if (ret == 0) { /* taken: the record no longer frees it */
        *res = l->ai;
        l->ai = NULL;
    }
    errno = l->err;
    sp__lookup_unref(l);
    return ret;
}
