/* A name lookup run as a helper job (helper_job.h), shared by the host
 * lookups (resolve.c) and the DNS queries (res_query.c): copies of the
 * arguments, buffers of its own, and an answer nobody took freed with it. */
#ifndef SP_HOOK_LOOKUP_H
#define SP_HOOK_LOOKUP_H

#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdbool.h>
#include <stddef.h>

#include "helper_job.h"

typedef struct sp__lookup sp__lookup_t;

/* A state's resolver settings, carried to the helper's own state. */
typedef struct sp__res_settings {
    bool set; /* the caller's state was initialised */
    unsigned long options;
    int retrans, retry, nscount, ndots;
    struct sockaddr_in ns[MAXNS];
    char search[MAXDNSRCH][256];
    int nsearch;
} sp__res_settings_t;

struct sp__lookup {
    sp__job_t job; /* first: a job is its lookup */
    char *name;                 /* host name; getaddrinfo's node; DNS name */
    char *service;              /* getaddrinfo's service; DNS domain */
    struct addrinfo hints, *ai; /* getaddrinfo; has_hints: hints given */
    bool has_hints;
    int err;                    /* the helper's errno after the call */
    int af;
    unsigned char addr[16];     /* gethostbyaddr */
    socklen_t addrlen;
    struct sockaddr_storage sa; /* getnameinfo */
    socklen_t salen;
    int flags;
    bool want_host, want_serv;
    struct hostent he, *res;
    int herr, ret;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int cls, type, anslen;      /* res_query family */
    unsigned char *answer;
    sp__res_settings_t settings;
    _Alignas(max_align_t) char buf[8192]; /* glibc puts pointer arrays in it */
};

/* A zeroed record that runs `run`; NULL if out of memory. */
sp__lookup_t *sp__lookup_new(void (*run)(sp__job_t *j));
void sp__lookup_free(sp__lookup_t *l);

static inline void sp__lookup_unref(sp__lookup_t *l)
{
    sp__job_unref(&l->job);
}

/* sp__job_run for l. */
static inline int sp__lookup_run(const sp__hook_bridge_t *b, sp__lookup_t *l)
{
    return sp__job_run(b, &l->job);
}

#endif
