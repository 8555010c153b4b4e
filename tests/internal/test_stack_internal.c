/* The stack pool (framework/src/fiber/stack.c, compiled into this test): guard
 * regions fault, and a new slab's stacks arrive with their top page
 * already committed, so creating a fiber takes no page fault. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stack.h"
#include "testutil.h"

enum { N = 64, USABLE = 96 * 1024 }; /* a size no other stack here uses */

/* The kernel reads one byte at p for a pipe: EFAULT if p is a guard. */
static bool faults(const char *p)
{
    int fd[2];
    ck_assert_int_eq(pipe2(fd, O_CLOEXEC), 0);
    bool fault = write(fd[1], p, 1) < 0 && errno == EFAULT;
    close(fd[0]);
    close(fd[1]);
    return fault;
}

static bool resident(const char *page)
{
    unsigned char v = 0;
    ck_assert_int_eq(mincore((void *)page, (size_t)sysconf(_SC_PAGESIZE), &v), 0);
    return v & 1;
}

/* Whether this kernel commits pages of its caller through process_madvise()
 * (Linux >= 6.13; not qemu-user): where it does not, each fiber commits its
 * top page on first write, as before. */
static bool batch_commit_works(void)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    long done = -1;
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (pidfd >= 0) {
        struct iovec v = {.iov_base = p, .iov_len = ps};
        done = syscall(SYS_process_madvise, pidfd, &v, 1, 23 /* MADV_POPULATE_WRITE */, 0);
        close(pidfd);
    }
    bool works = done == (long)ps && resident(p);
    munmap(p, ps);
    return works;
}

/* N stacks from a fresh pool, none touched by this test before the check. */
START_TEST(new_stacks_have_their_top_page_committed)
{
    sp__stack_t st[N];
    long ps = sysconf(_SC_PAGESIZE);
    int committed = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(sp__stack_get(&st[i], USABLE), 0);
        ck_assert_uint_ge(st[i].total - st[i].guard, USABLE);
        committed += resident(st[i].lo + st[i].total - ps);
    }
    /* Below the top page nothing was committed: memory stays lazy. */
    for (int i = 0; i < N; i++)
        ck_assert(!resident(st[i].lo + st[i].total - 2 * ps));
    for (int i = 0; i < N; i++)
        sp__stack_put(&st[i]);
    if (batch_commit_works())
        ck_assert_int_eq(committed, N);
}
END_TEST

START_TEST(every_stack_of_a_slab_has_its_guard)
{
    sp__stack_t st[N];
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(sp__stack_get(&st[i], USABLE), 0);
        ck_assert_uint_eq(st[i].guard, sp__stack_guard_size());
        ck_assert(faults(st[i].lo));
        ck_assert(faults(st[i].lo + st[i].guard - 1));
        ck_assert(!faults(st[i].lo + st[i].guard));
    }
    for (int i = 0; i < N; i++)
        sp__stack_put(&st[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stack");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, new_stacks_have_their_top_page_committed);
    tcase_add_test(tc, every_stack_of_a_slab_has_its_guard);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
