/* A QEMU TCG plugin that counts the guest instructions a program executes and prints the
 * total to stderr when it exits ("icount: N"). Debian's qemu-user (the dynamic build) can
 * load plugins but ships none, so bench/instructions.py builds this one with the host's cc:
 *   qemu-aarch64 -plugin ./qemu_icount.so ./driver ...
 *
 * Only the few declarations it needs from QEMU's plugin API (version 1, QEMU 5.2 to 8.x) are
 * written out here, so no QEMU headers are needed. Each translated block adds its number of
 * instructions to one counter every time it runs, an inline add that QEMU emits into the
 * block, not a call. A block left early (a fault inside it) would still count whole; the
 * programs measured take no faults in their loops.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* never read here */
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  qemu_plugin_vcpu_tb_trans_cb_t cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
                                                     enum qemu_plugin_op op, void *ptr,
                                                     uint64_t imm);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                           void *userdata);

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

static uint64_t executed; /* the programs measured run one thread */

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed,
                                             qemu_plugin_tb_n_insns(tb));
}

static void report_at_exit(qemu_plugin_id_t id, void *userdata) {
    (void)id;
    (void)userdata;
    fprintf(stderr, "icount: %" PRIu64 "\n", executed);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                               char **argv) {
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
    return 0;
}
