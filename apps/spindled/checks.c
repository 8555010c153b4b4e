/* spindled's checks beyond types and bounds: a value the worker could not
 * use is refused where it is loaded, with its file:line:column (at start:
 * exit 2; on SIGHUP: the old configuration stays), rather than found by a
 * worker that then fails to start and is restarted again and again.
 *
 * Relative http.root, pid_file and https.cert/key paths are taken from the
 * directory spindled started in, as main.c resolves them (a daemon works in /). Unix
 * socket paths are bound as written, so they are checked as written. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <spindle/daemon.h>
#include <spindle/http.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>

#include "spindled.h"

/* Refuse the value being checked: the reason into the check's `msg`, -1. */
#define REFUSE(...) (snprintf(msg, len, __VA_ARGS__), -1)

/* `text` fit for one line of a message: control bytes shown as '?', and
 * at most 64 bytes of it. */
static const char *shown(const char *text, char *buf, size_t size)
{
    enum { MAX_SHOWN = 64 };
    size_t n = 0;
    for (; text[n] && n < MAX_SHOWN && n + 4 < size; n++)
        buf[n] = (unsigned char)text[n] < ' ' || text[n] == 0x7f ? '?' : text[n];
    strcpy(buf + n, text[n] ? "..." : "");
    return buf;
}

const char *spindled_from_start(const spindled_t *d, const char *path, char *buf,
                                size_t size)
{
    if (*path == '/')
        return path;
    int n = snprintf(buf, size, "%s/%s", d->start_dir, path);
    return n >= 0 && (size_t)n < size ? buf : NULL;
}

/* 0 when the directory that would hold `path` exists, else an errno. */
static int no_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return 0; /* the current directory */
    char dir[PATH_MAX];
    int n = slash == path ? 1 : (int)(slash - path);
    if (n >= (int)sizeof dir)
        return ENAMETOOLONG;
    snprintf(dir, sizeof dir, "%.*s", n, path);
    struct stat st;
    if (stat(dir, &st) < 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static int root_usable(const char *path, const char *show, char *msg, size_t len)
{
    struct stat st;
    if (stat(path, &st) < 0 || (S_ISDIR(st.st_mode) && access(path, R_OK | X_OK) < 0))
        return REFUSE("'%s': %s", show, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return REFUSE("'%s' is not a directory", show);
    return 0;
}

/* As the daemon will find it (its directory may be missing if the one
 * above it exists: the daemon creates one level). */
static int pid_file_usable(const char *path, const char *show, char *msg, size_t len)
{
    int rc = sp_daemon_pid_file_check(path);
    if (rc == -EISDIR)
        return REFUSE("'%s' is a directory", show);
    return rc ? REFUSE("the directory of '%s': %s", show, strerror(-rc)) : 0;
}

/* A path variable: "" (none) is fine; anything else is taken from the
 * start directory and checked by `usable`. */
static int check_path(const sp_cvalue_t *v, char *msg, size_t len, const spindled_t *d,
                      int (*usable)(const char *, const char *, char *, size_t))
{
    char buf[PATH_MAX], show[80];
    if (!*v->u.s)
        return 0;
    const char *path = spindled_from_start(d, v->u.s, buf, sizeof buf);
    if (!path)
        return REFUSE("path too long");
    return usable(path, shown(v->u.s, show, sizeof show), msg, len);
}

static int check_root(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    return check_path(v, msg, len, arg, root_usable);
}

static int check_pid_file(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    return check_path(v, msg, len, arg, pid_file_usable);
}

static bool same_addr(const sp_addr_t *a, const sp_addr_t *b)
{
    return a->len == b->len && memcmp(&a->ss, &b->ss, a->len) == 0;
}

static bool is_wildcard(const sp_addr_t *a)
{
    if (sp_addr_family(a) == AF_INET)
        return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return sp_addr_family(a) == AF_INET6 &&
           IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
}

/* Whether two listening addresses would take each other's connections:
 * with SO_REUSEPORT both binds succeed and the kernel shares the clients
 * out. The same Unix path, or the same port on the same address or on a
 * wildcard; port 0 (any free port) never clashes. */
static bool clash(const sp_addr_t *a, const sp_addr_t *b)
{
    int port = sp_addr_port(a);
    if (port == 0 || port != sp_addr_port(b))
        return false;
    return same_addr(a, b) || (port > 0 && (is_wildcard(a) || is_wildcard(b)));
}

/* Item `before` of a listen list, given the items before it (resolved
 * into a[]). */
static int check_address(const sp_strlist_t *list, size_t before, sp_addr_t *a, char *msg,
                         size_t len)
{
    const char *text = list->items[before];
    char show[80], show_i[80];
    shown(text, show, sizeof show);
    if (sp_addr_resolve(text, &a[before], 1) < 1)
        return REFUSE("bad address '%s' (host:port, [v6]:port or unix:/path)", show);
    if (sp_addr_family(&a[before]) == AF_UNIX) {
        int err = no_parent(((const struct sockaddr_un *)&a[before].ss)->sun_path);
        if (err)
            return REFUSE("the directory of '%s': %s", show, strerror(err));
    }
    for (size_t i = 0; i < before; i++)
        if (clash(&a[i], &a[before]))
            return REFUSE("'%s' clashes with '%s' before it", show,
                          shown(list->items[i], show_i, sizeof show_i));
    return 0;
}

/* arg: the server's section name, for the hint. */
static int check_listen(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    const sp_strlist_t *l = v->u.list;
    sp_addr_t a[SP_TCP_SERVER_MAX_ADDRS];
    if (l->n == 0)
        return REFUSE("no address (to turn the server off: %s.enabled: false)",
                      (const char *)arg);
    if (l->n > SP_TCP_SERVER_MAX_ADDRS)
        return REFUSE("%zu addresses, at most %d", l->n, SP_TCP_SERVER_MAX_ADDRS);
    for (size_t i = 0; i < l->n; i++)
        if (check_address(l, i, a, msg, len) < 0)
            return -1;
    return 0;
}

static int check_server_name(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    int rc = sp_http_server_check_name(v->u.s);
    if (rc == -EINVAL)
        return REFUSE("control bytes (other than tab) cannot go in a header");
    if (rc < 0)
        return REFUSE("%zu bytes, at most %d", strlen(v->u.s), SP_HTTP_SERVER_NAME_MAX);
    return 0;
}

/* Reachable from this host only: loopback, or a Unix socket. */
static bool local_only(const sp_addr_t *a)
{
    if (sp_addr_family(a) == AF_UNIX)
        return true;
    if (sp_addr_family(a) == AF_INET)
        return (ntohl(((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)&a->ss)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(v6) || (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
}

/* Whether `a` clashes with an address of the list variable `list`. */
static const char *clashes_with(const sp_addr_t *a, const sp_cvar_t *list)
{
    const sp_strlist_t *l = sp_cvar_list(list);
    for (size_t i = 0; i < l->n; i++) {
        sp_addr_t b;
        if (sp_addr_resolve(l->items[i], &b, 1) == 1 && clash(a, &b))
            return l->items[i];
    }
    return NULL;
}

/* The listen lists of the public servers that are enabled, in the order
 * their clashes are told (a later one against an earlier one). */
static int public_lists(const spindled_vars_t *v, const sp_cvar_t *out[3])
{
    const sp_cvar_t *all[][2] = {{v->http_enabled, v->http_listen},
                                 {v->https_enabled, v->https_listen},
                                 {v->echo_enabled, v->echo_listen}};
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (sp_cvar_bool(all[i][0]))
            out[n++] = all[i][1];
    return n;
}

/* "NAME: 'text' clashes with 'hit' of OTHER (source)", with the sources. */
static int told_clash(const sp_cvar_t *v, const char *text, const char *hit,
                      const sp_cvar_t *other)
{
    char show[80], show_hit[80];
    fprintf(stderr, "%s: %s: %s: '%s' clashes with '%s' of %s (%s)\n", spindled_name,
            sp_cvar_source(v), sp_cvar_name(v), shown(text, show, sizeof show),
            shown(hit, show_hit, sizeof show_hit), sp_cvar_name(other),
            sp_cvar_source(other));
    return -EINVAL;
}

int spindled_check_servers(const spindled_t *d)
{
    const sp_cvar_t *lists[3];
    int n = public_lists(&d->v, lists);
    /* Every list passed its checks (addresses that resolve); a name that
     * stops resolving now is left to the worker. */
    for (int i = 1; i < n; i++) {
        const sp_strlist_t *l = sp_cvar_list(lists[i]);
        for (size_t k = 0; k < l->n; k++) {
            sp_addr_t a;
            if (sp_addr_resolve(l->items[k], &a, 1) != 1)
                continue;
            for (int j = 0; j < i; j++) {
                const char *hit = clashes_with(&a, lists[j]);
                if (hit)
                    return told_clash(lists[i], l->items[k], hit, lists[j]);
            }
        }
    }
    return 0;
}

int spindled_check_admin(const spindled_t *d)
{
    const spindled_vars_t *v = &d->v;
    const char *text = sp_cvar_string(v->admin_listen);
    char show[80];
    sp_addr_t a;
    if (!*text || sp_addr_resolve(text, &a, 1) != 1) /* empty, or its check said */
        return 0;
    shown(text, show, sizeof show);
    if (!local_only(&a) && !sp_cvar_bool(v->admin_allow_public)) {
        fprintf(stderr,
                "%s: %s: admin.listen: '%s' is not a loopback address (metrics and fiber "
                "dumps show internals; to serve them there, set admin.allow_public: true)\n",
                spindled_name, sp_cvar_source(v->admin_listen), show);
        return -EINVAL;
    }
    const sp_cvar_t *lists[3];
    int n = public_lists(v, lists);
    for (int i = 0; i < n; i++) {
        const char *hit = clashes_with(&a, lists[i]);
        if (hit)
            return told_clash(v->admin_listen, text, hit, lists[i]);
    }
    return 0;
}

/* admin.listen: "" (none) or one address that resolves. */
static int check_admin_listen(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    sp_addr_t a;
    char show[80];
    if (!*v->u.s || sp_addr_resolve(v->u.s, &a, 1) == 1)
        return 0;
    return REFUSE("bad address '%s' (host:port, [v6]:port or unix:/path)",
                  shown(v->u.s, show, sizeof show));
}

static int check_protocols(const sp_cvalue_t *v, char *msg, size_t len, void *arg)
{
    (void)arg;
    char show[80];
    if (!strcmp(v->u.s, "TLSv1.2") || !strcmp(v->u.s, "TLSv1.3"))
        return 0;
    return REFUSE("'%s' is not TLSv1.2 or TLSv1.3 (the oldest protocol accepted)",
                  shown(v->u.s, show, sizeof show));
}

/* A start-up rule broken: "spindled: SOURCE: NAME: why". */
static int told(const sp_cvar_t *v, const char *why)
{
    fprintf(stderr, "%s: %s: %s: %s\n", spindled_name, sp_cvar_source(v), sp_cvar_name(v),
            why);
    return -EINVAL;
}

int spindled_check_https(const spindled_t *d)
{
    const spindled_vars_t *v = &d->v;
    if (sp_cvar_bool(v->http_redirect_https) && !sp_cvar_bool(v->https_enabled))
        return told(v->http_redirect_https,
                    "true needs the HTTPS server to send clients to (https.enabled: true)");
    if (!sp_cvar_bool(v->https_enabled))
        return 0;
    if (!*d->tls_cert || !*d->tls_key)
        return told(v->https_enabled, "true needs https.cert and https.key (PEM files: the "
                                      "certificate and its private key)");
    /* Read the files now, so that a bad one stops the start with OpenSSL's
     * reason instead of failing every worker. */
    sp_tls_config_t *tls = spindled_tls_config(d);
    sp_tls_config_free(tls);
    return tls ? 0 : -EINVAL;
}

int spindled_add_checks(spindled_t *d)
{
    if (!getcwd(d->start_dir, sizeof d->start_dir))
        return -errno;
    const struct {
        sp_cvar_t *v;
        sp_cvar_check_fn fn;
        void *arg;
    } checks[] = {
        {d->v.pid_file, check_pid_file, d},
        {d->v.http_listen, check_listen, "http"},
        {d->v.http_root, check_root, d},
        {d->v.http_server_name, check_server_name, NULL},
        {d->v.https_listen, check_listen, "https"},
        {d->v.https_protocols, check_protocols, NULL},
        {d->v.echo_listen, check_listen, "echo"},
        {d->v.admin_listen, check_admin_listen, NULL},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        int rc = sp_cvar_set_check(checks[i].v, checks[i].fn, checks[i].arg);
        if (rc < 0)
            return rc;
    }
    return 0;
}
