/* Task groups (see group.h).
 *
 * Everything is under the group's lock `lk`. A job is PENDING while a
 * dependency is unmet, READY (in the ready FIFO) when it only waits for the
 * group to start or for a free slot, SCHEDULED from the moment it takes a
 * slot (its task is queued or running) until it finishes as OK or FAILED;
 * CANCELLED jobs never ran. `running` counts SCHEDULED jobs, so the limit
 * holds even for tasks still in the run queue.
 *
 * A finishing job releases its dependents and starts ready jobs into free
 * slots itself, so nothing else has to poll. Tasks are handed to the
 * scheduler after unlocking; the waiters are delivered only when the group
 * is complete, and a complete group schedules nothing, so a woken waiter
 * may destroy the group: the finisher's unlock was its last touch.
 */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "spindle/group.h"
#include "spindle/task.h"
#include "spindle/sync.h"

enum { PENDING, READY, SCHEDULED, OK, FAILED, CANCELLED };

typedef struct ids {
    int *v;
    int n, cap;
} ids_t;

typedef struct job {
    struct sp_group *g;
    sp_job_fn fn;
    void *arg;
    int id;
    int state;
    int unmet;          /* dependencies not yet succeeded */
    ids_t deps;         /* edges to what it waits for: the cycle check */
    ids_t dependents;   /* who waits for it: released when it succeeds */
    int rprev, rnext;   /* ready FIFO links (ids), -1 = none */
    struct job *launch; /* to-schedule list, built under lk */
    sp_fiber_t *fiber;  /* under lk: its fiber while it runs */
    sp_fiber_t *interrupt; /* cancel_locked's referenced copy of fiber */
    struct job *inext;  /* cancel_locked's list of running jobs */
} job_t;

struct sp_group {
    sp__spin_t lk;
    sp_scheduler_t *s;
    char name[32];
    int limit;
    job_t **jobs; /* stable pointers: tasks hold them */
    int njobs, capjobs;
    int rhead, rtail;
    bool started, cancelled;
    int fail_job, fail_code;
    int running, succeeded, failed, ncancelled;
    int interrupting; /* cancels still interrupting running jobs */
    uint64_t deadline_ns; /* its creator's deadline scope: the jobs' */
    unsigned *mark; /* cycle check: visited stamps, one per job */
    unsigned stamp;
    sp__wq_t waiters;
};
_Static_assert(offsetof(struct sp_group, lk) == 0, "sp__sync_new");

static int ids_add(ids_t *l, int id)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        int *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}

sp_group_t *sp_group_create(sp_scheduler_t *s, const char *name, int limit)
{
    if (!s || limit < 0) {
        errno = EINVAL;
        return NULL;
    }
    sp_group_t *g = sp__sync_new(sizeof *g);
    if (!g)
        return NULL;
    g->s = s;
    strncpy(g->name, name ? name : "group", sizeof g->name - 1);
    g->limit = limit;
    g->rhead = g->rtail = -1;
    g->fail_job = -1;
    g->deadline_ns = sp_deadline_current();
    return g;
}

void sp_group_destroy(sp_group_t *g)
{
    if (!g)
        return;
    sp_group_cancel(g);
    sp_group_wait(g, SP_FOREVER, NULL); /* the jobs still running */
    for (int i = 0; i < g->njobs; i++) {
        free(g->jobs[i]->deps.v);
        free(g->jobs[i]->dependents.v);
        free(g->jobs[i]);
    }
    free(g->jobs);
    free(g->mark);
    sp__sync_free(g);
}

const char *sp_group_name(const sp_group_t *g)
{
    return g->name;
}

/* ---- ready FIFO (lk held) ---------------------------------------------- */

static void ready_push(sp_group_t *g, job_t *j)
{
    j->state = READY;
    j->rnext = -1;
    j->rprev = g->rtail;
    if (g->rtail >= 0)
        g->jobs[g->rtail]->rnext = j->id;
    else
        g->rhead = j->id;
    g->rtail = j->id;
}

static void ready_remove(sp_group_t *g, job_t *j)
{
    if (j->rprev >= 0)
        g->jobs[j->rprev]->rnext = j->rnext;
    else
        g->rhead = j->rnext;
    if (j->rnext >= 0)
        g->jobs[j->rnext]->rprev = j->rprev;
    else
        g->rtail = j->rprev;
    j->rprev = j->rnext = -1;
}

/* Fill free slots from the ready FIFO; the jobs to schedule go on *launch
 * (scheduled after unlocking). */
static void fill_slots(sp_group_t *g, job_t **launch)
{
    while (g->started && !g->cancelled && g->rhead >= 0 &&
           (g->limit == SP_GROUP_UNLIMITED || g->running < g->limit)) {
        job_t *j = g->jobs[g->rhead];
        ready_remove(g, j);
        j->state = SCHEDULED;
        g->running++;
        j->launch = *launch;
        *launch = j;
    }
}

static bool complete(const sp_group_t *g)
{
    return g->succeeded + g->failed + g->ncancelled == g->njobs && !g->interrupting;
}

/* The first failure (or a cancel): no job that has not started ever will,
 * and the running ones are interrupted (ECANCELED) once lk is released:
 * their fibers, each with a reference, are pushed on *running. */
static void cancel_locked(sp_group_t *g, int job, int code, job_t **running)
{
    g->cancelled = true;
    g->fail_job = job;
    g->fail_code = code;
    for (int i = 0; i < g->njobs; i++) {
        job_t *j = g->jobs[i];
        if (j->fiber) {
            g->interrupting += !*running; /* once: see interrupt_running */
            sp_fiber_ref(j->fiber);
            j->interrupt = j->fiber;
            j->inext = *running;
            *running = j;
        }
        if (j->state == READY)
            ready_remove(g, j);
        if (j->state == READY || j->state == PENDING) {
            j->state = CANCELLED;
            g->ncancelled++;
        }
    }
}

/* lk held: if the group is complete, claim every waiter onto d. */
static void release_waiters(sp_group_t *g, sp__dlist_t *d)
{
    sp__wnode_t *n;
    if (complete(g))
        while ((n = sp__wq_claim_first(&g->waiters, 0)))
            sp__dlist_add(d, n->wait);
}

static void launch_all(sp_group_t *g, job_t *list);

/* After cancel_locked, lk released: interrupt the jobs it found running
 * (a job that has ended meanwhile gets -ESRCH, harmlessly). The group is
 * not complete until this is done, so no waiter can destroy it (and the
 * jobs) under us. */
static void interrupt_running(sp_group_t *g, job_t *list)
{
    if (!list)
        return;
    while (list) {
        job_t *j = list;
        list = j->inext;
        sp_fiber_interrupt(j->interrupt, ECANCELED);
        sp_fiber_unref(j->interrupt);
    }
    sp__dlist_t d = {NULL};
    sp__spin_lock(&g->lk);
    g->interrupting--;
    release_waiters(g, &d);
    sp__spin_unlock(&g->lk);
    sp__dlist_deliver(&d);
}

/* A SCHEDULED job is over: ran (code), or cancelled before it ran. */
static void finish(sp_group_t *g, job_t *j, int code, bool ran)
{
    job_t *launch = NULL, *running = NULL;
    sp__dlist_t d = {NULL};
    sp__spin_lock(&g->lk);
    g->running--;
    j->fiber = NULL;
    if (!ran) {
        j->state = CANCELLED;
        g->ncancelled++;
    } else if (code == 0) {
        j->state = OK;
        g->succeeded++;
        for (int i = 0; i < j->dependents.n; i++) {
            job_t *k = g->jobs[j->dependents.v[i]];
            if (--k->unmet == 0 && k->state == PENDING)
                ready_push(g, k);
        }
    } else {
        j->state = FAILED;
        g->failed++;
        if (!g->cancelled)
            cancel_locked(g, j->id, code, &running);
    }
    fill_slots(g, &launch);
    release_waiters(g, &d);
    sp__spin_unlock(&g->lk);
    interrupt_running(g, running);
    launch_all(g, launch); /* empty once complete: g is not touched */
    sp__dlist_deliver(&d);
}

static void run_job(void *arg)
{
    job_t *j = arg;
    sp_group_t *g = j->g;
    sp__spin_lock(&g->lk);
    bool go = !g->cancelled; /* cancelled while queued: never runs */
    if (go)
        j->fiber = sp_fiber_current();
    sp__spin_unlock(&g->lk);
    int code = 0;
    if (go) {
        sp_deadline_t scope;
        bool scoped = g->deadline_ns && sp_deadline_push(&scope, g->deadline_ns) == 0;
        code = j->fn(j->arg);
        if (scoped)
            sp_deadline_pop(&scope);
    }
    finish(g, j, code, go);
}

static void launch_all(sp_group_t *g, job_t *list)
{
    /* The list was built newest first; schedule in FIFO order. */
    SP__SLIST_REVERSE(job_t, list, launch);
    while (list) {
        job_t *j = list;
        list = j->launch;
        int rc = sp_schedule(g->s, run_job, j, SP_ANY_WORKER);
        if (rc < 0) /* the scheduler is gone or out of memory: the job
                     * fails with that error as its code */
            finish(g, j, rc, true);
    }
}

/* ---- building the graph ------------------------------------------------ */

static bool valid(const sp_group_t *g, int id)
{
    return id >= 0 && id < g->njobs;
}

/* Does `from` depend on `target`, directly or through others? */
static int reaches(sp_group_t *g, int from, int target)
{
    if (from == target)
        return 1;
    int *stack = malloc((size_t)g->njobs * sizeof *stack);
    if (!stack)
        return -ENOMEM;
    if (++g->stamp == 0) { /* wrapped: old stamps could look fresh */
        memset(g->mark, 0, (size_t)g->njobs * sizeof *g->mark);
        g->stamp = 1;
    }
    int top = 0, found = 0;
    stack[top++] = from;
    g->mark[from] = g->stamp;
    while (top && !found) {
        job_t *j = g->jobs[stack[--top]];
        for (int i = 0; i < j->deps.n; i++) {
            int d = j->deps.v[i];
            if (d == target) {
                found = 1;
                break;
            }
            if (g->mark[d] != g->stamp) {
                g->mark[d] = g->stamp;
                stack[top++] = d;
            }
        }
    }
    free(stack);
    return found;
}

/* lk held: make j wait for dep (both valid, j not started). */
static int add_edge(sp_group_t *g, job_t *j, job_t *dep)
{
    if (dep->state == OK)
        return 0; /* already satisfied */
    int rc = ids_add(&j->deps, dep->id);
    if (rc < 0)
        return rc;
    rc = ids_add(&dep->dependents, j->id);
    if (rc < 0) {
        j->deps.n--;
        return rc;
    }
    if (j->state == READY) {
        ready_remove(g, j);
        j->state = PENDING;
    }
    j->unmet++;
    return 0;
}

static int grow_jobs(sp_group_t *g)
{
    if (g->njobs < g->capjobs)
        return 0;
    int cap = g->capjobs ? g->capjobs * 2 : 16;
    job_t **v = realloc(g->jobs, (size_t)cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    g->jobs = v;
    unsigned *m = realloc(g->mark, (size_t)cap * sizeof *m);
    if (!m)
        return -ENOMEM;
    memset(m + g->capjobs, 0, (size_t)(cap - g->capjobs) * sizeof *m);
    g->mark = m;
    g->capjobs = cap;
    return 0;
}

int sp_group_add_after(sp_group_t *g, sp_job_fn fn, void *arg,
                       const int *deps, int ndeps)
{
    if (!g || !fn || ndeps < 0 || (ndeps && !deps))
        return -EINVAL;
    job_t *launch = NULL;
    sp__spin_lock(&g->lk);
    int rc = g->cancelled ? -ECANCELED : 0;
    for (int i = 0; i < ndeps && rc == 0; i++)
        if (!valid(g, deps[i]))
            rc = -EINVAL;
    if (rc == 0)
        rc = grow_jobs(g);
    job_t *j = rc == 0 ? calloc(1, sizeof *j) : NULL;
    if (rc == 0 && !j)
        rc = -ENOMEM;
    if (rc < 0) {
        sp__spin_unlock(&g->lk);
        return rc;
    }
    *j = (job_t){.g = g, .fn = fn, .arg = arg, .id = g->njobs,
                 .state = PENDING, .rprev = -1, .rnext = -1};
    for (int i = 0; i < ndeps && rc == 0; i++)
        rc = add_edge(g, j, g->jobs[deps[i]]);
    if (rc < 0) { /* ENOMEM: undo the edges made so far */
        for (int i = 0; i < j->deps.n; i++)
            g->jobs[j->deps.v[i]]->dependents.n--;
        free(j->deps.v);
        free(j);
        sp__spin_unlock(&g->lk);
        return rc;
    }
    g->jobs[g->njobs++] = j;
    if (!j->unmet)
        ready_push(g, j);
    fill_slots(g, &launch);
    sp__spin_unlock(&g->lk);
    launch_all(g, launch);
    return j->id;
}

int sp_group_add(sp_group_t *g, sp_job_fn fn, void *arg)
{
    return sp_group_add_after(g, fn, arg, NULL, 0);
}

int sp_group_depend(sp_group_t *g, int job, int dep)
{
    if (!g)
        return -EINVAL;
    sp__spin_lock(&g->lk);
    int rc = 0;
    if (g->cancelled)
        rc = -ECANCELED;
    else if (!valid(g, job) || !valid(g, dep))
        rc = -EINVAL;
    else if (g->jobs[job]->state != PENDING && g->jobs[job]->state != READY)
        rc = -EBUSY;
    else if ((rc = reaches(g, dep, job)) > 0)
        rc = -EDEADLK;
    if (rc == 0)
        rc = add_edge(g, g->jobs[job], g->jobs[dep]);
    sp__spin_unlock(&g->lk);
    return rc;
}

/* ---- running ----------------------------------------------------------- */

int sp_group_start(sp_group_t *g)
{
    job_t *launch = NULL;
    sp__spin_lock(&g->lk);
    int rc = g->started ? -EALREADY : g->cancelled ? -ECANCELED : 0;
    g->started = true;
    fill_slots(g, &launch);
    sp__spin_unlock(&g->lk);
    launch_all(g, launch);
    return rc;
}

int sp_group_cancel(sp_group_t *g)
{
    sp__dlist_t d = {NULL};
    sp__spin_lock(&g->lk);
    job_t *running = NULL;
    int rc = g->cancelled ? -EALREADY : 0;
    if (!g->cancelled)
        cancel_locked(g, -1, 0, &running);
    release_waiters(g, &d);
    sp__spin_unlock(&g->lk);
    interrupt_running(g, running);
    sp__dlist_deliver(&d);
    return rc;
}

bool sp_group_cancelled(sp_group_t *g)
{
    sp__spin_lock(&g->lk);
    bool c = g->cancelled;
    sp__spin_unlock(&g->lk);
    return c;
}

int sp_group_wait(sp_group_t *g, int64_t timeout_us,
                  sp_group_failure_t *failure)
{
    sp_group_start(g); /* -EALREADY / -ECANCELED: just wait */
    sp__spin_lock(&g->lk);
    if (!complete(g)) {
        int rc = sp__wait_queued(&g->lk, &g->waiters, timeout_us, SP__WAIT_GROUP);
        if (rc < 0)
            return rc;
        sp__spin_lock(&g->lk); /* released complete; jobs added since
                                     * are not waited for */
    }
    int rc = g->cancelled ? -ECANCELED : 0;
    if (rc && failure)
        *failure = (sp_group_failure_t){g->fail_job, g->fail_code};
    sp__spin_unlock(&g->lk);
    return rc;
}

void sp_group_progress(sp_group_t *g, sp_group_progress_t *out)
{
    sp__spin_lock(&g->lk);
    out->total = g->njobs;
    out->succeeded = g->succeeded;
    out->failed = g->failed;
    out->cancelled = g->ncancelled;
    out->done = g->succeeded + g->failed + g->ncancelled;
    out->running = g->running;
    sp__spin_unlock(&g->lk);
}
