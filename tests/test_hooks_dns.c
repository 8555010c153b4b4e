/* DNS queries in fibers (hooks/res_query.c): res_query, res_search,
 * res_querydomain and their res_n* forms, against a DNS server of the
 * test's own on 127.0.0.1 that the resolver state points at (so the
 * caller's settings must reach the helper that runs the query).
 *
 * The server holds its answer until the next fiber on the one worker has
 * run: a query that blocked the worker instead of parking the fiber gets
 * the server's "not released" answer (after its bounded wait), and the
 * test fails. An interrupted query returns at once with the interrupt's
 * errno while the server still holds the answer. Built twice, like
 * test_hooks. */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hook_util.h"
#include "task_util.h"
#include "testutil.h"

enum { K_QUERY, K_SEARCH, K_QUERYDOMAIN, K_NQUERY, K_NSEARCH, K_NQUERYDOMAIN, K_KINDS };
enum { HOLD_MS = 5000 };

/* ---- a DNS server that answers one query -------------------------------- */

static int dns_fd = -1, release[2] = {-1, -1}, asked[2] = {-1, -1};
static struct sockaddr_in dns_addr;
static char dns_name[256]; /* the name it was asked, dotted */

/* The question's name as dotted text; its length in the packet, or 0. */
static size_t question_name(const unsigned char *q, size_t len, char *out, size_t size)
{
    size_t at = 12, o = 0;
    while (at < len && q[at] && q[at] < 64 && at + 1 + q[at] < len && o + q[at] + 2 < size) {
        o += (size_t)snprintf(out + o, size - o, "%s%.*s", o ? "." : "", q[at],
                              (const char *)q + at + 1);
        at += 1 + (size_t)q[at];
    }
    return at < len && q[at] == 0 ? at + 1 - 12 : 0;
}

/* One query in; once released (or after HOLD_MS), an A record out:
 * 10.1.2.3 when released, 10.0.0.0 when not. */
static void *dns_serve(void *arg)
{
    (void)arg;
    unsigned char q[512], a[600];
    struct sockaddr_in from;
    socklen_t fromlen = sizeof from;
    struct pollfd p = {dns_fd, POLLIN, 0};
    if (poll(&p, 1, HOLD_MS) != 1)
        return NULL;
    ssize_t n = recvfrom(dns_fd, q, sizeof q, 0, (struct sockaddr *)&from, &fromlen);
    size_t qn = n > 12 ? question_name(q, (size_t)n, dns_name, sizeof dns_name) : 0;
    if (qn == 0 || (size_t)n < 12 + qn + 4)
        return NULL;
    ck_assert_int_eq(write(asked[1], "q", 1), 1);
    struct pollfd r = {release[0], POLLIN, 0};
    bool released = poll(&r, 1, HOLD_MS) == 1;
    size_t len = 12 + qn + 4;
    memcpy(a, q, len);
    a[2] = 0x81, a[3] = 0x80;                  /* a response, recursion available */
    a[6] = 0, a[7] = 1, a[8] = a[9] = a[10] = a[11] = 0; /* one answer */
    const unsigned char rr[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10,
                                released, released * 2, released * 3};
    memcpy(a + len, rr, sizeof rr);
    sendto(dns_fd, a, len + sizeof rr, 0, (struct sockaddr *)&from, fromlen);
    return NULL;
}

static pthread_t dns_start(void)
{
    dns_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    dns_addr = (struct sockaddr_in){.sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof dns_addr;
    ck_assert_int_eq(bind(dns_fd, (struct sockaddr *)&dns_addr, sizeof dns_addr), 0);
    ck_assert_int_eq(getsockname(dns_fd, (struct sockaddr *)&dns_addr, &len), 0);
    ck_assert_int_eq(pipe(release), 0);
    ck_assert_int_eq(pipe(asked), 0);
    dns_name[0] = '\0';
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, dns_serve, NULL), 0);
    return t;
}

static void dns_end(pthread_t t)
{
    pthread_join(t, NULL);
    int fds[] = {dns_fd, release[0], release[1], asked[0], asked[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
}

/* ---- the queries ---------------------------------------------------------- */

/* Point st at our server only, one try, a timeout longer than its hold. */
static void point_at_server(struct __res_state *st)
{
    st->nscount = 1;
    st->nsaddr_list[0] = dns_addr;
    st->retry = 1;
    st->retrans = 2 * HOLD_MS / 1000;
}

/* Query kind k for host.test (A, IN) into ans; what it returned. */
static int ask(int k, struct __res_state *st, unsigned char *ans, int len)
{
    switch (k) {
    case K_QUERY: return res_query("host.test", C_IN, T_A, ans, len);
    case K_SEARCH: return res_search("host.test", C_IN, T_A, ans, len);
    case K_QUERYDOMAIN: return res_querydomain("host", "test", C_IN, T_A, ans, len);
    case K_NQUERY: return res_nquery(st, "host.test", C_IN, T_A, ans, len);
    case K_NSEARCH: return res_nsearch(st, "host.test", C_IN, T_A, ans, len);
    default: return res_nquerydomain(st, "host", "test", C_IN, T_A, ans, len);
    }
}

static int kind, answer_len;
static unsigned char answer[512];

static void query_fiber(void *arg)
{
    (void)arg;
    struct __res_state own, *st = &_res;
    memset(&own, 0, sizeof own);
    if (kind >= K_NQUERY) {
        ck_assert_int_eq(res_ninit(&own), 0);
        st = &own;
    } else {
        ck_assert_int_eq(res_init(), 0);
    }
    point_at_server(st);
    answer_len = ask(kind, st, answer, sizeof answer);
    if (st == &own)
        res_nclose(&own);
}

static void releases_the_answer(void *arg)
{
    (void)arg;
    ck_assert_int_eq(write(release[1], "r", 1), 1);
}

START_TEST(query_parks_and_answers)
{
    kind = _i;
    pthread_t t = dns_start();
    run_on_one_worker(query_fiber, releases_the_answer);
    dns_end(t);
    ck_assert_str_eq(dns_name, "host.test");
    ck_assert_int_gt(answer_len, 4);
    const unsigned char *a = answer + answer_len - 4;
    ck_assert_msg(a[0] == 10 && a[1] == 1 && a[2] == 2 && a[3] == 3,
                  "answer %u.%u.%u.%u: the query held the worker", a[0], a[1], a[2], a[3]);
}
END_TEST

/* Interrupted while the server holds the answer: -1 and the interrupt's
 * errno at once; the helper's late answer goes to the record, not to the
 * gone frame. */
static int interrupted_query(void *arg)
{
    (void)arg;
    struct __res_state st;
    unsigned char ans[512];
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(res_ninit(&st), 0);
    point_at_server(&st);
    int rc = res_nquery(&st, "host.test", C_IN, T_A, ans, sizeof ans);
    int err = errno;
    res_nclose(&st);
    return rc == -1 ? err : 0;
}

START_TEST(interrupt_ends_a_query)
{
    pthread_t t = dns_start();
    sp_iomanager_t *io = io_new(1);
    sp_fiber_t *f = go_on(io, interrupted_query, NULL, 0);
    struct pollfd p = {asked[0], POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, HOLD_MS), 1); /* the server has the query */
    ck_assert_int_eq(sp_fiber_interrupt(f, ECANCELED), 0);
    ck_assert_int_eq(join(f), ECANCELED);
    ck_assert_int_eq(write(release[1], "r", 1), 1);
    io_end(io);
    dns_end(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_dns");
    TCase *tc = tcase_create("dns");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, query_parks_and_answers, 0, K_KINDS);
    tcase_add_test(tc, interrupt_ends_a_query);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
