/* The fiber dump's output (dump.h): text for people, JSON for tools.
 *
 * Symbols come from dladdr(), which is in libc, here after the registry
 * lock is released (libunwind's unw_get_proc_name would name static
 * functions too, but reads ELF symbol tables per frame, during the walk,
 * under the lock, and is not there without libunwind). dladdr knows only
 * exported symbols, so
 * a frame in a static function, or in an executable not linked with
 * -rdynamic, prints as module+offset, which addr2line -e module resolves.
 * Return addresses are looked up one byte back, inside the call, so a call
 * that ends a function is not named after the next one. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dump.h"
#include "fiber/fiber_internal.h"

/* Fibers detailed per group; the rest are counted. */
enum { TEXT_SHOWN = 3, JSON_SHOWN = 10 };

static const char *const state_names[SP__DUMP_STATES] = {
    "running", "runnable", "parked", "suspended"};

static const char *const kind_names[SP__WAIT_KINDS] = {
    [SP__WAIT_NONE] = "", [SP__WAIT_OTHER] = "other",
    [SP__WAIT_FD_READ] = "fd read", [SP__WAIT_FD_WRITE] = "fd write",
    [SP__WAIT_FD_ANY] = "fd poll", [SP__WAIT_SLEEP] = "sleep",
    [SP__WAIT_MUTEX] = "mutex", [SP__WAIT_COND] = "cond",
    [SP__WAIT_RWLOCK] = "rwlock", [SP__WAIT_SEM] = "sem",
    [SP__WAIT_WAITGROUP] = "wait group", [SP__WAIT_CHAN] = "channel",
    [SP__WAIT_GROUP] = "group", [SP__WAIT_JOIN] = "join",
    [SP__WAIT_PARK] = "park", [SP__WAIT_BLOCKING] = "blocking",
    [SP__WAIT_DRAIN] = "server drain"};

static const char *kind_name(unsigned k)
{
    return k < SP__WAIT_KINDS ? kind_names[k] : "other";
}

static bool is_fd_wait(unsigned k)
{
    return k == SP__WAIT_FD_READ || k == SP__WAIT_FD_WRITE ||
           k == SP__WAIT_FD_ANY;
}

static double seconds(const sp__dump_t *d, uint64_t since)
{
    if (!since || since > d->now)
        return 0;
    return (double)(d->now - since) / d->ticks_per_ns / 1e9;
}

/* The peer of a socket fd, "" if none: looked up now, so an fd closed and
 * reused since the snapshot shows its new peer. */
static void peer_of(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    buf[0] = '\0';
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    char host[INET6_ADDRSTRLEN];
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else if (ss.ss_family == AF_UNIX) {
        const struct sockaddr_un *un = (const void *)&ss;
        size_t n = sl > offsetof(struct sockaddr_un, sun_path)
                       ? sl - offsetof(struct sockaddr_un, sun_path) : 0;
        if (n && un->sun_path[0])
            snprintf(buf, len, "unix:%.*s", (int)n, un->sun_path);
        else
            snprintf(buf, len, "unix");
    }
}

typedef struct {
    const char *func, *module; /* NULL if unknown */
    uintptr_t off;             /* from func, else from the module's base */
} sym_t;

static sym_t symbol(uintptr_t pc)
{
    Dl_info info;
    sym_t s = {NULL, NULL, pc};
    if (!dladdr((void *)(pc - 1), &info))
        return s;
    const char *slash = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    s.module = slash ? slash + 1 : info.dli_fname;
    if (info.dli_sname && info.dli_saddr) {
        s.func = info.dli_sname;
        s.off = pc - (uintptr_t)info.dli_saddr;
    } else {
        s.off = pc - (uintptr_t)info.dli_fbase;
    }
    return s;
}

static void text_fiber(FILE *out, const sp__dump_t *d, const sp__dump_rec_t *r)
{
    fprintf(out, "  fiber %llu \"%s\" worker %d, age %.3fs",
            (unsigned long long)r->id, r->name, r->worker, seconds(d, r->born));
    if (r->state == SP__DUMP_PARKED)
        fprintf(out, ", waiting %.3fs", seconds(d, r->since));
    fprintf(out, ", stack %zu KiB", sp__stack_used(&r->stack, r->top) / 1024);
    if (is_fd_wait(r->kind)) {
        char peer[128];
        peer_of(r->fd, peer, sizeof peer);
        fprintf(out, ", fd %d%s%s", r->fd, peer[0] ? " peer " : "", peer);
    }
    fputc('\n', out);
}

static void text_frames(FILE *out, const sp__dump_rec_t *r)
{
    for (int i = 0; i < r->nframes; i++) {
        sym_t s = symbol(r->pc[i]);
        fprintf(out, "    #%-2d 0x%016llx ", i, (unsigned long long)r->pc[i]);
        if (s.func)
            fprintf(out, "%s+0x%llx (%s)\n", s.func, (unsigned long long)s.off,
                    s.module);
        else if (s.module)
            fprintf(out, "%s+0x%llx\n", s.module, (unsigned long long)s.off);
        else
            fputs("?\n", out);
    }
}

static void text_group(FILE *out, const sp__dump_t *d, const sp__dump_group_t *g)
{
    const sp__dump_rec_t *r = g->recs[0];
    fprintf(out, "\n%zu fiber%s %s", g->count, g->count == 1 ? "" : "s",
            state_names[r->state]);
    if (r->kind != SP__WAIT_NONE)
        fprintf(out, " on %s", kind_name(r->kind));
    fputs(":\n", out);
    size_t shown = g->count < TEXT_SHOWN ? g->count : TEXT_SHOWN;
    for (size_t i = 0; i < shown; i++)
        text_fiber(out, d, g->recs[i]);
    if (g->count > shown) {
        fprintf(out, "  and %zu more, ids", g->count - shown);
        for (size_t i = shown; i < g->count && i < shown + 8; i++)
            fprintf(out, " %llu", (unsigned long long)g->recs[i]->id);
        fputs(g->count > shown + 8 ? " ...\n" : "\n", out);
    }
    text_frames(out, r);
}

int sp__dump_print_text(FILE *out, const sp__dump_t *d)
{
    fprintf(out, "spindle fiber dump: pid %d, %zu fibers (%zu running, %zu "
            "runnable, %zu parked, %zu suspended) in %zu groups\n",
            (int)getpid(), d->nrecs, d->by_state[SP__DUMP_RUNNING],
            d->by_state[SP__DUMP_RUNNABLE], d->by_state[SP__DUMP_PARKED],
            d->by_state[SP__DUMP_SUSPENDED], d->ngroups);
    for (size_t i = 0; i < d->ngroups; i++)
        text_group(out, d, &d->groups[i]);
    fputs("end of fiber dump\n", out);
    return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_fiber(FILE *out, const sp__dump_t *d, const sp__dump_rec_t *r)
{
    fprintf(out, "{\"id\":%llu,\"name\":", (unsigned long long)r->id);
    json_string(out, r->name);
    fprintf(out, ",\"worker\":%d,\"age_s\":%.6f,\"wait_s\":%.6f,"
            "\"stack_used\":%zu", r->worker, seconds(d, r->born),
            seconds(d, r->since), sp__stack_used(&r->stack, r->top));
    if (is_fd_wait(r->kind)) {
        char peer[128];
        peer_of(r->fd, peer, sizeof peer);
        fprintf(out, ",\"fd\":%d,\"peer\":", r->fd);
        json_string(out, peer);
    }
    fputc('}', out);
}

static void json_frames(FILE *out, const sp__dump_rec_t *r)
{
    fputs(",\"frames\":[", out);
    for (int i = 0; i < r->nframes; i++) {
        sym_t s = symbol(r->pc[i]);
        fprintf(out, "%s{\"pc\":\"0x%llx\",\"function\":", i ? "," : "",
                (unsigned long long)r->pc[i]);
        json_string(out, s.func);
        fputs(",\"module\":", out);
        json_string(out, s.module);
        fprintf(out, ",\"offset\":%llu}", (unsigned long long)s.off);
    }
    fputc(']', out);
}

static void json_group(FILE *out, const sp__dump_t *d, const sp__dump_group_t *g)
{
    const sp__dump_rec_t *r = g->recs[0];
    fprintf(out, "{\"count\":%zu,\"state\":\"%s\",\"wait\":", g->count,
            state_names[r->state]);
    json_string(out, kind_name(r->kind));
    fputs(",\"fibers\":[", out);
    for (size_t i = 0; i < g->count && i < JSON_SHOWN; i++) {
        if (i)
            fputc(',', out);
        json_fiber(out, d, g->recs[i]);
    }
    fputc(']', out);
    json_frames(out, r);
    fputc('}', out);
}

int sp__dump_print_json(FILE *out, const sp__dump_t *d)
{
    fprintf(out, "{\"pid\":%d,\"fibers\":%zu", (int)getpid(), d->nrecs);
    for (int s = 0; s < SP__DUMP_STATES; s++)
        fprintf(out, ",\"%s\":%zu", state_names[s], d->by_state[s]);
    fputs(",\"groups\":[", out);
    for (size_t i = 0; i < d->ngroups; i++) {
        if (i)
            fputc(',', out);
        json_group(out, d, &d->groups[i]);
    }
    fputs("]}\n", out);
    return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}
