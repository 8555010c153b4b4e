/* Address parsing, resolution and printing. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "spindle/net.h"

/* Split "host:port" / "[v6]:port" into host and port text. */
static int split(const char *text, char *host, size_t hsize, const char **port)
{
    const char *colon;
    const char *h = text;
    size_t hlen;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = text + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon || strchr(text, ':') != colon) /* bare v6 needs [] */
            return -EINVAL;
        hlen = (size_t)(colon - text);
    }
    if (hlen >= hsize || !colon[1])
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = colon + 1;
    return 0;
}

static int parse_port(const char *p)
{
    char *end;
    long v = strtol(p, &end, 10);
    return *end || v < 0 || v > 65535 || end == p ? -EINVAL : (int)v;
}

static int parse_unix(const char *path, sp_addr_t *out)
{
    struct sockaddr_un *un = (struct sockaddr_un *)&out->ss;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof un->sun_path)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, n + 1);
    out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

int sp_addr_parse(const char *text, sp_addr_t *out)
{
    if (!text || !out)
        return -EINVAL;
    if (strncmp(text, "unix:", 5) == 0)
        return parse_unix(text + 5, out);
    char host[64];
    const char *port_text;
    int rc = split(text, host, sizeof host, &port_text);
    if (rc < 0)
        return rc;
    int port = parse_port(port_text);
    if (port < 0)
        return port;
    memset(out, 0, sizeof *out);
    struct sockaddr_in *in4 = (struct sockaddr_in *)&out->ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;
    if (strcmp(host, "*") == 0 || inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        out->len = sizeof *in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *in6;
        return 0;
    }
    return -EINVAL;
}

int sp_addr_resolve(const char *text, sp_addr_t *out, int max)
{
    if (!text || !out || max < 1)
        return -EINVAL;
    if (sp_addr_parse(text, out) == 0)
        return 1;
    char host[256];
    const char *port_text;
    if (split(text, host, sizeof host, &port_text) < 0 || parse_port(port_text) < 0)
        return -EINVAL;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int rc = getaddrinfo(host, port_text, &hints, &res);
    if (rc != 0)
        return rc == EAI_SYSTEM ? -errno : (rc == EAI_MEMORY ? -ENOMEM : -ENOENT);
    int n = 0;
    for (ai = res; ai && n < max; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof out[n].ss)
            continue;
        memset(&out[n], 0, sizeof out[n]);
        memcpy(&out[n].ss, ai->ai_addr, ai->ai_addrlen);
        out[n].len = ai->ai_addrlen;
        n++;
    }
    freeaddrinfo(res);
    return n ? n : -ENOENT;
}

int sp_addr_format(const sp_addr_t *a, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    int n;
    switch (a->ss.ss_family) {
    case AF_INET: {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof ip);
        n = snprintf(buf, size, "%s:%u", ip, ntohs(in4->sin_port));
        break;
    }
    case AF_INET6: {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        n = snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
        break;
    }
    case AF_UNIX: {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&a->ss;
        n = snprintf(buf, size, "unix:%s", un->sun_path);
        break;
    }
    default:
        return -EAFNOSUPPORT;
    }
    return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

int sp_addr_family(const sp_addr_t *a)
{
    return a->ss.ss_family;
}

int sp_addr_port(const sp_addr_t *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    if (a->ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    return -1;
}

int sp_addr_of_socket(int fd, bool peer, sp_addr_t *out)
{
    memset(out, 0, sizeof *out);
    out->len = sizeof out->ss;
    int rc = peer ? getpeername(fd, (struct sockaddr *)&out->ss, &out->len)
                  : getsockname(fd, (struct sockaddr *)&out->ss, &out->len);
    return rc < 0 ? -errno : 0;
}
