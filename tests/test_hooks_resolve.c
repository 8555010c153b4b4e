/* The older resolver entry points in fibers (hooks/resolve.c): each gives
 * the answer it gives on a plain thread (for localhost, in /etc/hosts on
 * every machine) and runs as one job of the helper pool (its job count,
 * sp_blocking_stats, moves by one), so the worker is free meanwhile (that
 * the next fiber then runs during a slow lookup is test_hooks_dns's proof,
 * with a DNS server that holds its answer); the non-reentrant ones answer
 * from the calling fiber's own storage: a second fiber's lookup does not
 * overwrite the first one's answer. Built twice, like test_hooks. */
#include <check.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>

#include "hook_util.h"
#include "testutil.h"

enum { K_BYNAME, K_BYNAME2, K_BYNAME_R, K_BYNAME2_R, K_BYADDR, K_BYADDR_R, K_NAMEINFO,
       K_KINDS };

/* Lookup kind k of localhost / 127.0.0.1, summed up as text. */
static void lookup(int k, char *out, size_t len)
{
    struct in_addr lo = {htonl(INADDR_LOOPBACK)};
    struct hostent he, *h = NULL;
    char buf[2048];
    int herr = 0;
    switch (k) {
    case K_BYNAME: h = gethostbyname("localhost"); break;
    case K_BYNAME2: h = gethostbyname2("localhost", AF_INET); break;
    case K_BYNAME_R: gethostbyname_r("localhost", &he, buf, sizeof buf, &h, &herr); break;
    case K_BYNAME2_R:
        gethostbyname2_r("localhost", AF_INET, &he, buf, sizeof buf, &h, &herr);
        break;
    case K_BYADDR: h = gethostbyaddr(&lo, sizeof lo, AF_INET); break;
    case K_BYADDR_R:
        gethostbyaddr_r(&lo, sizeof lo, AF_INET, &he, buf, sizeof buf, &h, &herr);
        break;
    case K_NAMEINFO: {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80), .sin_addr = lo};
        char host[128], serv[32];
        int rc = getnameinfo((struct sockaddr *)&sin, sizeof sin, host, sizeof host, serv,
                             sizeof serv, NI_NUMERICSERV);
        snprintf(out, len, "%d %s %s", rc, rc ? "" : host, rc ? "" : serv);
        return;
    }
    }
    if (!h) {
        snprintf(out, len, "none");
        return;
    }
    unsigned char *a = (unsigned char *)h->h_addr_list[0];
    snprintf(out, len, "%s %d %d %u.%u.%u.%u", h->h_name, h->h_addrtype, h->h_length,
             a ? a[0] : 0, a ? a[1] : 0, a ? a[2] : 0, a ? a[3] : 0);
}

static int kind;
static char in_fiber[512];
static uint64_t jobs_before, jobs_during;

static void lookup_fiber(void *arg)
{
    (void)arg;
    jobs_before = helper_jobs();
    lookup(kind, in_fiber, sizeof in_fiber);
    jobs_during = helper_jobs() - jobs_before;
}

START_TEST(same_answer_on_a_helper)
{
    kind = _i;
    char on_thread[512];
    lookup(kind, on_thread, sizeof on_thread);
    ck_assert_str_ne(on_thread, "none");
    run_on_one_worker(lookup_fiber, hook_nothing);
    ck_assert_str_eq(in_fiber, on_thread);
    ck_assert_uint_eq(jobs_during, 1);
}
END_TEST

static struct hostent *first;
static char first_name[64];

static void keeps_its_answer(void *arg)
{
    (void)arg;
    first = gethostbyname("localhost");
    ck_assert_ptr_nonnull(first);
    snprintf(first_name, sizeof first_name, "%s", first->h_name);
    sp_yield(); /* the other fiber looks up meanwhile */
    ck_assert_str_eq(first->h_name, first_name);
}

static void looks_up_too(void *arg)
{
    (void)arg;
    struct in_addr lo = {htonl(INADDR_LOOPBACK)};
    struct hostent *h = gethostbyaddr(&lo, sizeof lo, AF_INET);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_ne(h, first); /* its own storage, not glibc's static one */
}

START_TEST(answers_are_per_fiber)
{
    run_on_one_worker(keeps_its_answer, looks_up_too);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_resolve");
    TCase *tc = tcase_create("resolve");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, same_answer_on_a_helper, 0, K_KINDS);
    tcase_add_test(tc, answers_are_per_fiber);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
