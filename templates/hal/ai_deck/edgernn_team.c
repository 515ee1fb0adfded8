/* The team on GAP8: the cluster's cores. edgernn_init opens the cluster, sets its clock (powering it up
 * resets its FLL to 50 MHz) and takes the arena from its L1 when the build placed it there; every step
 * is one cluster task whose master core runs the schedule, and each shared kernel is forked over
 * EDGERNN_CLUSTER_CORES cores with pi_cl_team_fork. Each core computes its own sub-range (pi_core_id);
 * the fork returns once every core has finished its own.
 *
 * The master core also counts the cycles of each task with its performance counter (pi_perf on the
 * cluster: the cluster timer, at the cluster clock), which edgernn_hal_cycles reports: the step's work,
 * without the FC's dispatch and wake-up around it. The FC's own counters cannot time a step under
 * FreeRTOS: the FC sleeps while the cluster works, and its timers belong to the OS. */
#include "pmsis.h"

#include "edgernn_team.h"

#ifndef EDGERNN_CLUSTER_CORES
#define EDGERNN_CLUSTER_CORES 8
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
static team_task_t team_task;
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
static void team_task_entry(void *arg)
{
    const team_task_t *task = (const team_task_t *)arg;
    uint32_t start;
    if (!perf_started) {
        pi_perf_conf(1u << PI_PERF_CYCLES);
        pi_perf_reset();
        pi_perf_start();
        perf_started = 1;
    }
    start = pi_perf_read(PI_PERF_CYCLES);
    task->body(task->arg);
    /* the 32-bit counter wraps; one task is far shorter than a wrap */
    cluster_cycles += (uint32_t)(pi_perf_read(PI_PERF_CYCLES) - start);
}

void edgernn_team_enter(void (*body)(void *), void *arg)
{
    team_task.body = body;
    team_task.arg = arg;
    pi_cluster_task(&cluster_task, team_task_entry, &team_task);
    (void)pi_cluster_send_task_to_cl(&cluster_dev, &cluster_task);
}

uint64_t edgernn_team_cluster_cycles(void)
{
    return cluster_cycles;
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

int edgernn_team_workers(void)
{
    return EDGERNN_CLUSTER_CORES;
}

int edgernn_team_offloaded(void)
{
    return 1;
}

#endif /* EDGERNN_CLUSTER_CORES */
