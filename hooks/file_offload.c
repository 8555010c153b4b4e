/* File offload (sp_hook_set_file_offload): a fiber's read, readv, pread,
 * write, writev, pwrite, fsync and fdatasync on a regular file or block
 * device run on the helper pool, so a slow disk holds only that fiber.
 *
 * Each helper job (helper_job.h) works on a dup of the fd and on bytes of
 * its own, at most CHUNK of them: an interrupted call returns at once, and
 * the helper that finishes later neither writes into the caller's buffer
 * nor reaches another file that took the fd's number. Bytes are copied
 * once more than in a plain call; offload is for disks slower than that. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_job.h"
#include "io_call.h"

enum { CHUNK = 1 << 20, PAGE = 4096 };
enum { F_READ, F_PREAD, F_WRITE, F_PWRITE, F_FSYNC, F_FDATASYNC };

typedef struct file_job {
    sp__job_t job; /* first: a job is its file_job */
    int op;
    int fd; /* the dup */
    off_t off;
    size_t len;
    ssize_t ret;
    int err;
    char *data; /* page-aligned, as O_DIRECT wants a buffer to be */
} file_job_t;

static void file_run(sp__job_t *j)
{
    file_job_t *f = (file_job_t *)j;
    const sp__real_t *r = sp__real();
    switch (f->op) {
    case F_READ: f->ret = r->read(f->fd, f->data, f->len); break;
    case F_PREAD: f->ret = r->pread(f->fd, f->data, f->len, f->off); break;
    case F_WRITE: f->ret = r->write(f->fd, f->data, f->len); break;
    case F_PWRITE: f->ret = r->pwrite(f->fd, f->data, f->len, f->off); break;
    case F_FSYNC: f->ret = r->fsync(f->fd); break;
    default: f->ret = r->fdatasync(f->fd);
    }
    f->err = errno;
}

static void file_free(sp__job_t *j)
{
    file_job_t *f = (file_job_t *)j;
    sp__real()->close(f->fd);
    free(f->data);
    free(f);
}

static file_job_t *file_job_new(int op, int fd, size_t len, off_t off)
{
    file_job_t *f = malloc(sizeof *f);
    if (!f)
        return NULL;
    f->data = aligned_alloc(PAGE, (len + PAGE - 1) / PAGE * PAGE + (len ? 0 : PAGE));
    f->fd = f->data ? sp__real()->fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (f->fd < 0) {
        free(f->data);
        free(f);
        return NULL;
    }
    f->job.run = file_run;
    f->job.free = file_free;
    f->op = op;
    f->off = off;
    f->len = len;
    return f;
}

/* One job of op on fd: its result, with errno set when it is -1. */
static ssize_t file_call(const sp__hook_bridge_t *b, int op, int fd, char *in,
                         const char *out, size_t len, off_t off)
{
    file_job_t *f = file_job_new(op, fd, len, off);
    if (!f)
        return -1; /* errno from malloc or the dup */
    if (out)
        memcpy(f->data, out, len);
    if (sp__job_run(b, &f->job) < 0)
        return -1; /* f is given up */
    ssize_t n = f->ret;
    if (n > 0 && in)
        memcpy(in, f->data, (size_t)n);
    errno = f->err;
    sp__job_unref(&f->job);
    return n;
}

/* A read or write of len bytes in jobs of at most CHUNK, until done, the
 * file ends (a short count) or an error; an error after progress returns
 * the bytes moved, as the kernel does. off < 0: at the file's offset. */
static ssize_t file_rw(const sp__hook_bridge_t *b, bool writing, int fd, char *in,
                       const char *out, size_t len, off_t off)
{
    int op = writing ? (off < 0 ? F_WRITE : F_PWRITE) : (off < 0 ? F_READ : F_PREAD);
    size_t done = 0;
    do {
        size_t n = len - done < CHUNK ? len - done : CHUNK;
        ssize_t got = file_call(b, op, fd, in ? in + done : NULL, out ? out + done : NULL, n,
                                off < 0 ? off : off + (off_t)done);
        if (got < 0)
            return done ? (ssize_t)done : -1;
        done += (size_t)got;
        if ((size_t)got < n)
            break;
    } while (done < len);
    return (ssize_t)done;
}

/* The bridge when the calling fiber's call on fd is to be offloaded. */
static const sp__hook_bridge_t *offloading(int fd)
{
    const sp__hook_bridge_t *b = NULL;
    unsigned fl = 0;
    sp__hook_managed(fd, &b, &fl);
    return (fl & SP_FD_FILE) && ((fl & SP_FD_OFFLOAD) || b->file_offload_all()) ? b : NULL;
}

/* readv/writev through one contiguous copy. */
static ssize_t file_vector(const sp__hook_bridge_t *b, io_call_t *c)
{
    bool writing = c->op == OP_WRITEV;
    size_t len = iov_total(c->iov, c->iovcnt), at = 0;
    char *tmp = malloc(len ? len : 1);
    if (!tmp)
        return -1;
    for (int i = 0; writing && i < c->iovcnt; at += c->iov[i++].iov_len)
        memcpy(tmp + at, c->iov[i].iov_base, c->iov[i].iov_len);
    ssize_t n = file_rw(b, writing, c->fd, writing ? NULL : tmp, writing ? tmp : NULL, len, -1);
    at = 0;
    for (int i = 0; !writing && n > 0 && i < c->iovcnt && at < (size_t)n; i++) {
        size_t k = (size_t)n - at < c->iov[i].iov_len ? (size_t)n - at : c->iov[i].iov_len;
        memcpy(c->iov[i].iov_base, tmp + at, k);
        at += k;
    }
    int err = errno;
    free(tmp);
    errno = err;
    return n;
}

ssize_t sp__hook_file_io(const sp__hook_bridge_t *b, unsigned fl, io_call_t *c)
{
    if (!(fl & SP_FD_OFFLOAD) && !b->file_offload_all())
        return call_libc(c);
    switch (c->op) {
    case OP_READ: return file_rw(b, false, c->fd, c->buf, NULL, c->len, -1);
    case OP_WRITE: return file_rw(b, true, c->fd, NULL, c->cbuf, c->len, -1);
    case OP_READV:
    case OP_WRITEV: return file_vector(b, c);
    default: return call_libc(c); /* the socket calls: ENOTSOCK */
    }
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
    const sp__hook_bridge_t *b = off >= 0 ? offloading(fd) : NULL;
    if (!b)
        return sp__real()->pread(fd, buf, len, off);
    return file_rw(b, false, fd, buf, NULL, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    const sp__hook_bridge_t *b = off >= 0 ? offloading(fd) : NULL;
    if (!b)
        return sp__real()->pwrite(fd, buf, len, off);
    return file_rw(b, true, fd, NULL, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
    return pread(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    return pwrite(fd, buf, len, off);
}

ssize_t __pread_chk(int fd, void *buf, size_t len, off_t off, size_t buflen)
{
    if (len > buflen)
        __chk_fail();
    return pread(fd, buf, len, off);
}

ssize_t __pread64_chk(int fd, void *buf, size_t len, off_t off, size_t buflen)
{
    return __pread_chk(fd, buf, len, off, buflen);
}

static int file_sync(int fd, int op)
{
    const sp__hook_bridge_t *b = offloading(fd);
    if (!b)
        return op == F_FSYNC ? sp__real()->fsync(fd) : sp__real()->fdatasync(fd);
    return (int)file_call(b, op, fd, NULL, NULL, 0, -1);
}

int fsync(int fd)
{
    return file_sync(fd, F_FSYNC);
}

int fdatasync(int fd)
{
    return file_sync(fd, F_FDATASYNC);
}
