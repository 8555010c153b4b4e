/* A name lookup run on a helper thread (sp_run_blocking), shared by the
 * host lookups (resolve.c) and the DNS queries (res_query.c).
 *
 * An interrupt or a deadline (task.h) may end the caller's wait while the
 * helper still works: the helper then must not write into the caller's
 * frame, which is gone. So each call is a record of its own, with copies
 * of the arguments and its own buffers, held by the caller and by the
 * helper; whichever lets go last frees it (and an answer nobody took). */
#ifndef SP_HOOK_LOOKUP_H
#define SP_HOOK_LOOKUP_H

#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "hook_internal.h"

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
    _Atomic int refs;
    void (*run)(sp__lookup_t *l); /* on the helper */
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
sp__lookup_t *sp__lookup_new(void (*run)(sp__lookup_t *l));
void sp__lookup_free(sp__lookup_t *l);
void sp__lookup_unref(sp__lookup_t *l);

/* Run l on a helper. 0 with l's answer to read (the caller's reference
 * still held), or -1 with errno set: l is then given up. */
int sp__lookup_run(const sp__hook_bridge_t *b, sp__lookup_t *l);

#endif
