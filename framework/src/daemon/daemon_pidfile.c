/* The pid file: an fcntl write lock on the open file marks the running
 * instance. The kernel drops the lock when the process dies, so a stale
 * file left by a crash never blocks a new start (unlike "file exists").
 *
 * A daemon often runs as root and writes its pid file where others can
 * create names, so the file is opened without following a symlink, must be
 * a regular file of ours with one link (a planted link would make us
 * truncate its target), and its directory must not let another user swap
 * the file (writable by others only when sticky, like /tmp). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_internal.h"
#include "spindle/daemon.h"

long sp_daemon_read_pid(const char *pid_file)
{
    FILE *f = fopen(pid_file, "r");
    if (!f)
        return -1;
    long pid = -1;
    if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        pid = -1;
    fclose(f);
    return pid;
}

static int lock_whole_file(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    return fcntl(fd, F_SETLK, &fl);
}

static int write_pid(int fd)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
        return -1;
    return 0;
}

/* The directory holding `path` into dir ("." for a bare name); the
 * file's name, or NULL when the directory's name is too long. */
static const char *split_dir(const char *path, char dir[PATH_MAX])
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
        return path;
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= PATH_MAX)
        return NULL;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return slash + 1;
}

static int is_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int sp_daemon_pid_file_check(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return -EISDIR;
    char dir[PATH_MAX], up[PATH_MAX];
    if (!split_dir(path, dir))
        return -ENAMETOOLONG;
    int rc = is_dir(dir);
    /* One missing level is created (open_parent): the default
     * run/spindled.pid works in a fresh checkout. */
    if (rc == -ENOENT) {
        split_dir(dir, up); /* shorter than dir: fits */
        rc = is_dir(up);
    }
    return rc;
}

/* The directory of `path` (checked by sp_daemon_pid_file_check), created
 * when missing and opened; its descriptor, or -1 with errno. `*base`
 * points at the file's name. */
static int open_parent(const char *path, const char **base)
{
    char dir[PATH_MAX];
    *base = split_dir(path, dir);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -1;
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void refuse(const char *name, const char *path, const char *why)
{
    fprintf(stderr, "%s: pid file %s: %s\n", name, path, why);
}

/* The pid file opened in a safe place, or -1 after printing why. */
static int open_safely(const char *name, const char *path)
{
    const char *base;
    int rc = sp_daemon_pid_file_check(path);
    int dir = rc < 0 ? -1 : open_parent(path, &base);
    if (dir < 0) {
        refuse(name, path, strerror(rc < 0 ? -rc : errno));
        return -1;
    }
    struct stat st;
    int fd = -1;
    if (fstat(dir, &st) < 0)
        refuse(name, path, strerror(errno));
    else if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        refuse(name, path, "refused: its directory is writable by others and not sticky");
    else if ((fd = openat(dir, base, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
        refuse(name, path, errno == ELOOP ? "refused: it is a symbolic link" : strerror(errno));
    close(dir);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        st.st_uid != geteuid()) {
        refuse(name, path, "refused: not a regular file of ours with a single link");
        close(fd);
        return -1;
    }
    return fd;
}

int sp__pidfile_lock(const char *name, const char *path)
{
    int fd = open_safely(name, path);
    if (fd < 0)
        return -1;
    if (lock_whole_file(fd) < 0) {
        int err = errno;
        /* Read through a second stream: closing it would drop a lock we
         * held, but we hold none here. */
        long pid = sp_daemon_read_pid(path);
        if (err == EAGAIN || err == EACCES)
            fprintf(stderr, "%s: already running (pid %ld, pid file %s is locked)\n", name,
                    pid, path);
        else
            fprintf(stderr, "%s: pid file %s: cannot lock: %s\n", name, path, strerror(err));
        close(fd);
        return -1;
    }
    if (write_pid(fd) < 0) {
        fprintf(stderr, "%s: pid file %s: cannot write: %s\n", name, path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

void sp__pidfile_release(int fd, const char *path)
{
    if (fd < 0)
        return;
    unlink(path); /* while still locked, so no new instance's file is removed */
    close(fd);
}

int sp__path_absolute(const char *path, char *buf, size_t size)
{
    int n;
    if (path[0] == '/') {
        n = snprintf(buf, size, "%s", path);
    } else {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd))
            return -errno;
        n = snprintf(buf, size, "%s/%s", cwd, path);
    }
    return n >= 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}
