/* TEST DECLARATIONS ONLY, never shipped and never linked: the few PMSIS names the ai_deck HAL uses,
 * with the parameter and return types of GreenWaves' GAP SDK headers (rtos/pmsis/pmsis_api/include/
 * pmsis/: drivers/uart.h, cluster/cluster_sync/fc_to_cl_delegate.h, cluster/cluster_team/cl_team.h,
 * rtos/malloc/cl_l1_malloc.h, drivers/perf.h, rtos/os_frontend_api/os.h, and pi_open_from_conf).
 * They let tests compile the ai_deck HAL sources where the SDK is not installed. The SDK defines
 * some of these as static inline; plain prototypes are enough to check the calls compile. The structs
 * hold only the fields edgernn touches, named as in the SDK. */
#ifndef EDGERNN_TEST_PMSIS_DECLS_H
#define EDGERNN_TEST_PMSIS_DECLS_H

#include <stddef.h>
#include <stdint.h>

struct pi_device {
    void *config;
    void *data;
};

/* drivers/uart.h */
struct pi_uart_conf {
    uint32_t baudrate_bps;
    uint8_t stop_bit_count;
    uint8_t parity_mode;
    uint8_t word_size;
    uint8_t enable_rx;
    uint8_t enable_tx;
    uint8_t uart_id;
};
void pi_uart_conf_init(struct pi_uart_conf *conf);
int pi_uart_open(struct pi_device *device);
int pi_uart_write(struct pi_device *device, void *buffer, uint32_t size);
int pi_uart_read(struct pi_device *device, void *buffer, uint32_t size);

/* pmsis device helper */
void pi_open_from_conf(struct pi_device *device, void *conf);

/* cluster/cl_pmsis_types.h and cluster_sync/fc_to_cl_delegate.h */
struct pi_cluster_conf {
    int device_type;
    int id;
    void *heap_start;
    uint32_t heap_size;
};
struct pi_cluster_task {
    void (*entry)(void *);
    void *arg;
    void *stacks;
    uint32_t stack_size;
    uint32_t slave_stack_size;
    int nb_cores;
};
void pi_cluster_conf_init(struct pi_cluster_conf *conf);
int pi_cluster_open(struct pi_device *device);
struct pi_cluster_task *pi_cluster_task(struct pi_cluster_task *task, void (*entry)(void *), void *arg);
int pi_cluster_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task);

/* cluster_team/cl_team.h */
void pi_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg);
void pi_cl_team_barrier();
uint32_t pi_core_id();

/* rtos/malloc/cl_l1_malloc.h and l2_malloc.h */
void *pi_cl_l1_malloc(struct pi_device *device, uint32_t size);
void *pi_l2_malloc(int size);

/* drivers/perf.h */
typedef enum { PI_PERF_CYCLES = 16 } pi_perf_event_e;
void pi_perf_conf(unsigned events);
void pi_perf_reset();
void pi_perf_start();
unsigned int pi_perf_read(int id);

/* rtos/os_frontend_api/os.h */
int pmsis_kickoff(void *arg);
void pmsis_exit(int err);

#endif
