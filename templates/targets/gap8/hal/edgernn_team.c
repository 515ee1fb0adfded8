/* The team on GAP8: the cluster's cores. edgernn_init opens the cluster, sets its clock (powering it up
 * resets its FLL to 50 MHz) and takes the arena from its L1 when the build placed it there.
 *
 * How a step reaches the cluster (EDGERNN_CLUSTER_PERSISTENT, default 1):
 *
 *   1  one cluster task for the whole run. The first edgernn_team_enter sends one task
 *      (pi_cluster_send_task_to_cl_async) that never ends: its master core forks the team once
 *      (pi_cl_team_fork) into one parallel region that lives as long as the firmware. Per call, the
 *      FC writes the body and its argument into a mailbox, bumps the mailbox's sequence number and
 *      triggers the cluster software event CL_USER_EVENT (the event the GAP8 PMSIS reserves for a
 *      user's FC -> cluster synchronisation, targets/events.h) on the master core alone; the master
 *      sleeps on that event in the event unit (clock-gated) between steps. Each shared kernel is then
 *      two hardware barriers (pi_cl_team_barrier): the master publishes the job and meets the workers
 *      at the first, every core runs its own sub-range, and the second is the join. The workers sleep
 *      at the first barrier between ops and between steps. When the body returns, the master writes
 *      the sequence number back into the mailbox's `done`; the FC spins on that word (in L2, the FC's
 *      own memory: a poll costs the FC one L2 load and the cluster nothing), interrupts on, so the
 *      UART's receive queue keeps being served. The event latches in the event unit, so an event
 *      raised before the master sleeps wakes it at once: no wake-up is lost.
 *   0  one cluster task per call (pi_cluster_send_task_to_cl), each shared kernel forked anew with
 *      pi_cl_team_fork: the way before; kept so that both are measured and compared byte for byte.
 *
 * Every primitive here (pi_cluster_send_task_to_cl[_async], pi_cl_team_fork, pi_cl_team_barrier,
 * hal_eu_cluster_evt_trig_set, hal_eu_evt_mask_wait_and_clr, CL_USER_EVENT) is the same in the GAP
 * SDK's master and in release 4.8.0 (the AI-deck's docker image), FreeRTOS PMSIS for GAP8.
 *
 * The master core also counts the cycles of each body with its performance counter (pi_perf on the
 * cluster: the cluster timer, at the cluster clock): edgernn_team_cluster_cycles, the step's work on
 * the cluster without the FC's dispatch and wake-up around it. */
#include "pmsis.h"

#include "edgernn_team.h"

#ifndef EDGERNN_CLUSTER_CORES
#define EDGERNN_CLUSTER_CORES 8
#endif
/* 1: one cluster task for the whole run (above); 0: one task per step */
#ifndef EDGERNN_CLUSTER_PERSISTENT
#define EDGERNN_CLUSTER_PERSISTENT 1
#endif
/* Cluster clock; 0 keeps the power-up clock (50 MHz) */
#ifndef EDGERNN_CLUSTER_HZ
#define EDGERNN_CLUSTER_HZ 0
#endif

#if EDGERNN_CLUSTER_CORES == 0
/* `make EDGERNN_CLUSTER_CORES=0`: no cluster. The whole step runs on the fabric controller, a baseline
 * for measurements (bench/bench_gap8.py). The arena is taken from L2, and the step is timed with the
 * FC core's own PULP performance counters (PCER 0xCC0, PCMR 0xCC1, cycles 0x780), which count while
 * the FC works the step: it does not sleep in it, as it does while the cluster works. */
static uint64_t fc_cycles;

static inline uint32_t fc_cycle_count(void)
{
    uint32_t value;
    __asm__ volatile("csrr %0, 0x780" : "=r"(value));
    return value;
}

int edgernn_team_open(void)
{
    __asm__ volatile("csrw 0xCC0, %0" ::"r"(1u)); /* count cycles */
    __asm__ volatile("csrw 0xCC1, %0" ::"r"(1u)); /* start */
    return 0;
}

void *edgernn_team_fast_alloc(size_t nbytes)
{
    uint8_t *chunk = (uint8_t *)pi_l2_malloc((uint32_t)(nbytes + 4u));
    if (chunk == NULL) {
        return NULL;
    }
    return chunk + (((uintptr_t)chunk & 7u) ? 4u : 0u);
}

void edgernn_team_enter(void (*body)(void *), void *arg)
{
    const uint32_t start = fc_cycle_count();
    body(arg);
    fc_cycles += (uint32_t)(fc_cycle_count() - start);
}

uint64_t edgernn_team_cluster_cycles(void)
{
    return fc_cycles;
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

int edgernn_team_offloaded(void)
{
    return 0;
}

#else

typedef struct {
    edgernn_range_fn fn;
    const void *args;
    int count, grain;
} team_job_t;

typedef struct {
    void (*body)(void *);
    void *arg;
} team_task_t;

static struct pi_device cluster_dev;
static struct pi_cluster_conf cluster_conf;
static struct pi_cluster_task cluster_task;
static int cluster_opened;
static uint64_t cluster_cycles;  /* written by the cluster's master core, read by the FC between tasks */
static int perf_started;

int edgernn_team_open(void)
{
    if (cluster_opened) {
        return 0;
    }
    pi_cluster_conf_init(&cluster_conf);
    cluster_conf.id = 0;
    pi_open_from_conf(&cluster_dev, &cluster_conf);
    if (pi_cluster_open(&cluster_dev) != 0) {
        return -1;
    }
    if (EDGERNN_CLUSTER_HZ != 0 && pi_freq_set(PI_FREQ_DOMAIN_CL, EDGERNN_CLUSTER_HZ) != 0) {
        return -1;
    }
    cluster_opened = 1;
    return 0;
}

void *edgernn_team_fast_alloc(size_t nbytes)
{
    uint8_t *chunk;
    if (!cluster_opened) {
        return NULL;
    }
    /* pi_cl_l1_malloc aligns to 4 bytes; the arena wants 8. The chunk lives as long as the firmware. */
    chunk = (uint8_t *)pi_cl_l1_malloc(&cluster_dev, (uint32_t)(nbytes + 4u));
    if (chunk == NULL) {
        return NULL;
    }
    return chunk + (((uintptr_t)chunk & 7u) ? 4u : 0u);
}

/* On the cluster's master core: body, timed. */
static void team_run_timed(void (*body)(void *), void *arg)
{
    uint32_t start;
    if (!perf_started) {
        pi_perf_conf(1u << PI_PERF_CYCLES);
        pi_perf_reset();
        pi_perf_start();
        perf_started = 1;
    }
    start = pi_perf_read(PI_PERF_CYCLES);
    body(arg);
    /* the 32-bit counter wraps; one body is far shorter than a wrap */
    cluster_cycles += (uint32_t)(pi_perf_read(PI_PERF_CYCLES) - start);
}

uint64_t edgernn_team_cluster_cycles(void)
{
    return cluster_cycles;
}

int edgernn_team_workers(void)
{
    return EDGERNN_CLUSTER_CORES;
}

int edgernn_team_offloaded(void)
{
    return 1;
}

#if EDGERNN_CLUSTER_PERSISTENT

/* FC <-> cluster: written by the FC (body, arg, seq) and by the master core (done). In L2 (.bss under
 * FreeRTOS), where the FC polls `done` at no cost to the cluster; the master reads it once a step. */
typedef struct {
    void (*volatile body)(void *);
    void *volatile arg;
    volatile uint32_t seq;   /* bumped by the FC once body and arg are written */
    volatile uint32_t done;  /* seq of the last body the cluster has finished */
} team_mailbox_t;

static team_mailbox_t mailbox;
static int task_sent;
/* The job of the shared op in progress: written by the master before the barrier that starts it, read
 * by every worker after that barrier. In the cluster's L1 (PMSIS's PI_CL_L1 section), where each of
 * these accesses costs a core one cycle instead of an L2 round trip's ~9. */
PI_CL_L1 static team_job_t shared_job;

static void team_run_share(const team_job_t *job)
{
    int begin, end;
    edgernn_team_range((int)pi_core_id(), EDGERNN_CLUSTER_CORES, job->count, job->grain, &begin, &end);
    if (begin < end) {
        job->fn(job->args, begin, end);
    }
}

/* Core 0 (the master): wait for the FC's call, run it, say it is done; forever. */
static void team_master_loop(void)
{
    uint32_t seen = 0;
    for (;;) {
        uint32_t seq = mailbox.seq;
        if (seq == seen) {
            /* Sleep until the FC's event. It latches: raised since the read above, it wakes us at once. */
            hal_eu_evt_mask_wait_and_clr(1u << CL_USER_EVENT);
            continue;
        }
        seen = seq;
        team_run_timed(mailbox.body, mailbox.arg);
        mailbox.done = seq;
    }
}

/* Cores 1..n-1: at the first barrier, wait for an op; run its sub-range; meet the master at the join. */
static void team_worker_loop(void)
{
    for (;;) {
        pi_cl_team_barrier();
        team_run_share(&shared_job);
        pi_cl_team_barrier();
    }
}

static void team_region(void *arg)
{
    (void)arg;
    if (pi_core_id() == 0) {
        team_master_loop();
    } else {
        team_worker_loop();
    }
}

/* The one cluster task: the team's parallel region, which never returns. */
static void team_task_entry(void *arg)
{
    (void)arg;
#if EDGERNN_CLUSTER_CORES > 1
    pi_cl_team_fork(EDGERNN_CLUSTER_CORES, team_region, NULL);
#else
    team_master_loop();
#endif
}

/* The completion callback of the one task, which never completes: it is never run. */
static pi_task_t task_never_done;

void edgernn_team_enter(void (*body)(void *), void *arg)
{
    uint32_t seq;
    if (!task_sent) {
        pi_cluster_task(&cluster_task, team_task_entry, NULL);
        pi_task_block(&task_never_done);
        (void)pi_cluster_send_task_to_cl_async(&cluster_dev, &cluster_task, &task_never_done);
        task_sent = 1;
    }
    mailbox.body = body;
    mailbox.arg = arg;
    seq = mailbox.seq + 1u;
    mailbox.seq = seq;
    /* Read back before raising the event: the load completes only after the store, so the master,
     * once woken, cannot read the old sequence number and go back to sleep for good. */
    (void)mailbox.seq;
    /* to the master core (core mask 1) alone: the workers sleep at their barrier */
    hal_eu_cluster_evt_trig_set(CL_USER_EVENT, 1u);
    while (mailbox.done != seq) {
    }
}

void edgernn_team_split(edgernn_range_fn fn, const void *args, int count, int grain)
{
#if EDGERNN_CLUSTER_CORES > 1
    shared_job.fn = fn;
    shared_job.args = args;
    shared_job.count = count;
    shared_job.grain = grain;
    pi_cl_team_barrier();  /* the workers take shared_job */
    team_run_share(&shared_job);
    pi_cl_team_barrier();  /* every sub-range is done */
#else
    (void)grain;
    fn(args, 0, count);
#endif
}

#else /* EDGERNN_CLUSTER_PERSISTENT == 0 */

static team_task_t team_task;

static void team_task_entry(void *arg)
{
    const team_task_t *task = (const team_task_t *)arg;
    team_run_timed(task->body, task->arg);
}

void edgernn_team_enter(void (*body)(void *), void *arg)
{
    team_task.body = body;
    team_task.arg = arg;
    pi_cluster_task(&cluster_task, team_task_entry, &team_task);
    (void)pi_cluster_send_task_to_cl(&cluster_dev, &cluster_task);
}

static void team_worker(void *arg)
{
    const team_job_t *job = (const team_job_t *)arg;
    int begin, end;
    edgernn_team_range((int)pi_core_id(), EDGERNN_CLUSTER_CORES, job->count, job->grain, &begin, &end);
    if (begin < end) {
        job->fn(job->args, begin, end);
    }
    /* No pi_cl_team_barrier here: pi_cl_team_fork is itself the join. Each worker meets the master at
     * the fork's synchronisation barrier on return (cluster_core.S), and the master waits there for all
     * of them, so a second barrier would only add its cost to every shared op. */
}

void edgernn_team_split(edgernn_range_fn fn, const void *args, int count, int grain)
{
    team_job_t job;
    job.fn = fn;
    job.args = args;
    job.count = count;
    job.grain = grain;
    pi_cl_team_fork(EDGERNN_CLUSTER_CORES, team_worker, &job);
}

#endif /* EDGERNN_CLUSTER_PERSISTENT */

#endif /* EDGERNN_CLUSTER_CORES */
