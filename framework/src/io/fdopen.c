/* sp_fdopen (hook.h): a stdio stream whose reads and writes are calls to
 * read and write by name, so the hooks (linked or preloaded) see them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "spindle/hook.h"

static ssize_t cookie_read(void *c, char *buf, size_t len)
{
    return read((int)(intptr_t)c, buf, len);
}

/* stdio wants every byte taken; the hooked write on a socket the user sees
 * as blocking sends them all, a short count ends the stream's write. */
static ssize_t cookie_write(void *c, const char *buf, size_t len)
{
    ssize_t n = write((int)(intptr_t)c, buf, len);
    return n < 0 ? 0 : n; /* stdio's error report for a write */
}

static int cookie_seek(void *c, off64_t *off, int whence)
{
    off64_t at = lseek64((int)(intptr_t)c, *off, whence);
    if (at < 0)
        return -1;
    *off = at;
    return 0;
}

static int cookie_close(void *c)
{
    return close((int)(intptr_t)c);
}

FILE *sp_fdopen(int fd, const char *mode)
{
    if (fd < 0 || !mode) {
        errno = EBADF;
        return NULL;
    }
    cookie_io_functions_t io = {cookie_read, cookie_write, cookie_seek, cookie_close};
    return fopencookie((void *)(intptr_t)fd, mode, io);
}
