/* The curated table of glibc functions that are not hooked and can block
 * a worker thread, each with why and what to do instead; and the hooked
 * calls that still block in one use. A function hooks/preload.sym gains
 * counts as hooked whatever this file says (classify.h), so an entry
 * here can be stale but never wrong in the output. Kept to calls that
 * really wait (on another party, the disk, a signal or the network):
 * not every libc function that makes a system call.
 *
 * Where a reason is shared by a family it is written once, below. */
#include "classify.h"

#define OFFLOAD "offload it with sp_run_blocking"

static const char lock[] =
    "a contended lock blocks the worker, and deadlocks it if a parked fiber holds it: use "
    "spindle/sync.h in your code (a library's short critical sections are harmless)";
static const char join[] =
    "waits for a thread to end: join fibers with sp_go handles (task.h), or " OFFLOAD;
static const char file_io[] =
    "file I/O waits for the disk (file offload does not cover this call): fine for small "
    "local files; else " OFFLOAD;
static const char child[] = "waits for a child process to change state: " OFFLOAD;
static const char spawn[] = "runs a command and waits for it: " OFFLOAD;
static const char file_lock[] = "waits for a file lock held by another process: " OFFLOAD;
static const char ipc[] = "a System V or POSIX IPC wait in the kernel: " OFFLOAD;
static const char sig[] = "waits for a signal: keep it on a thread of its own (not a worker)";
static const char nss[] =
    "an NSS lookup, which can go to the network (LDAP, NIS, sssd, DNS): " OFFLOAD;
static const char dns_send[] = "sends a DNS query and waits for the answer (not hooked): " OFFLOAD;
static const char old_resolv[] =
    "a DNS query on a blocking socket, by the name binaries built before glibc 2.34 call "
    "(not hooked; res_query and friends are): " OFFLOAD;
static const char mmsg[] =
    "not hooked: on a socket made in a fiber (non-blocking underneath) it fails with EAGAIN "
    "instead of waiting; poll() (hooked) first";

const hc_entry_t hc_blocking[] = {
    {"fdopen",
     "stdio on a socket reads and writes inside libc, where no hook sees it: use sp_fdopen "
     "(hook.h); on a regular file it is file I/O"},
    {"pthread_mutex_lock", lock},
    {"pthread_mutex_timedlock", lock},
    {"pthread_mutex_clocklock", lock},
    {"pthread_cond_wait", lock},
    {"pthread_cond_timedwait", lock},
    {"pthread_cond_clockwait", lock},
    {"pthread_rwlock_rdlock", lock},
    {"pthread_rwlock_wrlock", lock},
    {"pthread_rwlock_timedrdlock", lock},
    {"pthread_rwlock_timedwrlock", lock},
    {"pthread_rwlock_clockrdlock", lock},
    {"pthread_rwlock_clockwrlock", lock},
    {"pthread_barrier_wait", lock},
    {"sem_wait", lock},
    {"sem_timedwait", lock},
    {"sem_clockwait", lock},
    {"mtx_lock", lock},
    {"mtx_timedlock", lock},
    {"cnd_wait", lock},
    {"cnd_timedwait", lock},
    {"pthread_join", join},
    {"pthread_timedjoin_np", join},
    {"pthread_clockjoin_np", join},
    {"thrd_join", join},
    {"flock", file_lock},
    {"lockf", file_lock},
    {"lockf64", file_lock},
    {"waitpid", child},
    {"wait", child},
    {"wait3", child},
    {"wait4", child},
    {"waitid", child},
    {"system", spawn},
    {"popen", spawn},
    {"pclose", spawn},
    {"msgrcv", ipc},
    {"msgsnd", ipc},
    {"semop", ipc},
    {"semtimedop", ipc},
    {"mq_receive", ipc},
    {"mq_send", ipc},
    {"mq_timedreceive", ipc},
    {"mq_timedsend", ipc},
    {"sigwait", sig},
    {"sigwaitinfo", sig},
    {"sigtimedwait", sig},
    {"sigsuspend", sig},
    {"pause", sig},
    {"res_send", dns_send},
    {"res_nsend", dns_send},
    {"__res_query", old_resolv},
    {"__res_search", old_resolv},
    {"__res_querydomain", old_resolv},
    {"__res_send", dns_send},
    {"__res_nquery", old_resolv},
    {"__res_nsearch", old_resolv},
    {"__res_nquerydomain", old_resolv},
    {"__res_nsend", dns_send},
    {"gethostent", nss},
    {"gethostent_r", nss},
    {"getservbyname", nss},
    {"getservbyname_r", nss},
    {"getservbyport", nss},
    {"getservbyport_r", nss},
    {"getnetbyname", nss},
    {"getnetbyaddr", nss},
    {"gai_suspend", "waits for getaddrinfo_a lookups to end: " OFFLOAD " (getaddrinfo is hooked)"},
    {"getpwnam", nss},
    {"getpwnam_r", nss},
    {"getpwuid", nss},
    {"getpwuid_r", nss},
    {"getpwent", nss},
    {"getpwent_r", nss},
    {"getgrnam", nss},
    {"getgrnam_r", nss},
    {"getgrgid", nss},
    {"getgrgid_r", nss},
    {"getgrent", nss},
    {"getgrent_r", nss},
    {"getgrouplist", nss},
    {"initgroups", nss},
    {"getspnam", nss},
    {"getspnam_r", nss},
    {"recvmmsg", mmsg},
    {"sendmmsg", mmsg},
    {"open", file_io},
    {"open64", file_io},
    {"__open_2", file_io},
    {"__open64_2", file_io},
    {"openat", file_io},
    {"openat64", file_io},
    {"__openat_2", file_io},
    {"__openat64_2", file_io},
    {"creat", file_io},
    {"creat64", file_io},
    {"fopen", file_io},
    {"fopen64", file_io},
    {"freopen", file_io},
    {"freopen64", file_io},
    {"fread", file_io},
    {"fread_unlocked", file_io},
    {"__fread_chk", file_io},
    {"__fread_unlocked_chk", file_io},
    {"fgets", file_io},
    {"fgets_unlocked", file_io},
    {"__fgets_chk", file_io},
    {"__fgets_unlocked_chk", file_io},
    {"getline", file_io},
    {"getdelim", file_io},
    {"__getdelim", file_io},
    {"sync", file_io},
    {"syncfs", file_io},
    {"msync", file_io},
    {"copy_file_range", file_io},
};
const size_t hc_blocking_count = sizeof hc_blocking / sizeof hc_blocking[0];

static const char record_lock[] =
    "F_SETLKW and F_OFD_SETLKW still wait for a record lock: offload such calls with "
    "sp_run_blocking";
static const char offloadable[] =
    "on a regular file (where this call is used) the kernel's, waiting for the disk, unless "
    "file offload is on: sp_hook_set_file_offload (hook.h)";

const hc_entry_t hc_hooked_notes[] = {
    {"fcntl", record_lock},
    {"fcntl64", record_lock},
    {"pread", offloadable},
    {"pread64", offloadable},
    {"__pread_chk", offloadable},
    {"__pread64_chk", offloadable},
    {"pwrite", offloadable},
    {"pwrite64", offloadable},
    {"fsync", offloadable},
    {"fdatasync", offloadable},
};
const size_t hc_hooked_notes_count = sizeof hc_hooked_notes / sizeof hc_hooked_notes[0];
