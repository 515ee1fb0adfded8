/* The portable team: serial by default (host, qemu_riscv32). Compiled with -DEDGERNN_THREADS=N
 * (N > 1, and -pthread), N POSIX threads share each split: the caller is worker 0 and N - 1 threads,
 * started once, wait for work. Which worker computes which range never changes the bytes. */
#if defined(EDGERNN_THREADS) && EDGERNN_THREADS > 1
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#endif

#include "edgernn_team.h"

#if defined(EDGERNN_THREADS) && EDGERNN_THREADS > 1

#define TEAM_SIZE EDGERNN_THREADS

typedef struct {
    edgernn_range_fn fn;
    const void *args;
    int count, grain;
} team_job_t;

static pthread_mutex_t team_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t team_go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t team_done = PTHREAD_COND_INITIALIZER;
static team_job_t team_job;
static unsigned long team_generation; /* one more for every split; workers wait for it to change */
static int team_pending;              /* helper threads still working on the current split */
static int team_opened;
static pthread_t team_threads[TEAM_SIZE - 1];

static void run_share(const team_job_t *job, int k)
{
    int begin, end;
    edgernn_team_range(k, TEAM_SIZE, job->count, job->grain, &begin, &end);
    if (begin < end) {
        job->fn(job->args, begin, end);
    }
}

static void *team_worker(void *arg)
{
    const int k = (int)(intptr_t)arg;
    unsigned long seen = 0;
    for (;;) {
        team_job_t job;
        pthread_mutex_lock(&team_lock);
        while (team_generation == seen) {
            pthread_cond_wait(&team_go, &team_lock);
        }
        seen = team_generation;
        job = team_job;
        pthread_mutex_unlock(&team_lock);

        run_share(&job, k);

        pthread_mutex_lock(&team_lock);
        if (--team_pending == 0) {
            pthread_cond_signal(&team_done);
        }
        pthread_mutex_unlock(&team_lock);
    }
    return NULL;
}

int edgernn_team_open(void)
{
    int k;
    pthread_mutex_lock(&team_lock);
    if (team_opened) {
        pthread_mutex_unlock(&team_lock);
        return 0;
    }
    for (k = 1; k < TEAM_SIZE; ++k) {
        if (pthread_create(&team_threads[k - 1], NULL, team_worker, (void *)(intptr_t)k) != 0) {
            pthread_mutex_unlock(&team_lock);
            return -1;
        }
    }
    team_opened = 1;
    pthread_mutex_unlock(&team_lock);
    return 0;
}

void edgernn_team_split(edgernn_range_fn fn, const void *args, int count, int grain)
{
    team_job_t job;
    job.fn = fn;
    job.args = args;
    job.count = count;
    job.grain = grain;
    pthread_mutex_lock(&team_lock);
    if (!team_opened) {
        pthread_mutex_unlock(&team_lock);
        fn(args, 0, count);
        return;
    }
    team_job = job;
    team_pending = TEAM_SIZE - 1;
    ++team_generation;
    pthread_cond_broadcast(&team_go);
    pthread_mutex_unlock(&team_lock);

    run_share(&job, 0);

    /* The mutex orders every helper's writes before the caller reads the outputs. */
    pthread_mutex_lock(&team_lock);
    while (team_pending > 0) {
        pthread_cond_wait(&team_done, &team_lock);
    }
    pthread_mutex_unlock(&team_lock);
}

int edgernn_team_workers(void)
{
    return TEAM_SIZE;
}

#else

int edgernn_team_open(void)
{
    return 0;
}

void edgernn_team_split(edgernn_range_fn fn, const void *args, int count, int grain)
{
    (void)grain;
    fn(args, 0, count);
}

int edgernn_team_workers(void)
{
    return 1;
}

#endif

/* A process has no memory closer to its threads than the rest: the arena stays a static array. */
void *edgernn_team_fast_alloc(size_t nbytes)
{
    (void)nbytes;
    return NULL;
}

void edgernn_team_enter(void (*body)(void *), void *arg)
{
    body(arg);
}

int edgernn_team_offloaded(void)
{
    return 0;
}
