/* A TCG plugin for qemu-system-arm that counts the guest instructions QEMU executes: the family's second
 * witness of "instructions (QEMU)", beside TIM2 under -icount shift=0 (hal.c).
 *
 *   -plugin libinsn_count.so,mark=0x08000abc,mark=...  -d plugin -D LOG
 *
 * Every executed instruction adds one to the count. Each time an instruction at a `mark` address is about to
 * run, the log gets "insn mark 0x08000abc COUNT" (instructions run before it); at exit, "insn total COUNT".
 *
 * Debian's QEMU loads plugins but ships no qemu-plugin.h, so the few functions of the plugin API version 1
 * (QEMU 7.2's include/qemu/qemu-plugin.h) that this file calls are declared here. Build with the host's gcc:
 *   gcc -shared -fPIC -O2 -o libinsn_count.so insn_count.c */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_MARKS 16

static uint64_t count;      /* one vCPU (the Cortex-M4): no per-CPU counts needed */
static uint64_t marks[MAX_MARKS];
static int n_marks;

static void at_mark(unsigned int vcpu_index, void *userdata)
{
    char line[80];
    (void)vcpu_index;
    /* the inline add of this instruction runs first: the count without it is what ran before */
    snprintf(line, sizeof line, "insn mark 0x%" PRIx64 " %" PRIu64 "\n", (uint64_t)(uintptr_t)userdata, count - 1);
    qemu_plugin_outs(line);
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t pc = qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &count, 1);
        for (int m = 0; m < n_marks; ++m) {
            if (marks[m] == pc) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, at_mark, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)pc);
            }
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    char line[64];
    (void)id;
    (void)userdata;
    snprintf(line, sizeof line, "insn total %" PRIu64 "\n", count);
    qemu_plugin_outs(line);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; ++i) {
        if (strncmp(argv[i], "mark=", 5) != 0 || n_marks == MAX_MARKS) {
            fprintf(stderr, "insn_count: unknown or one too many argument: %s\n", argv[i]);
            return -1;
        }
        marks[n_marks++] = strtoull(argv[i] + 5, NULL, 0);
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
