/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM driver on a real libvirtd with a real (TCG) guest: issue 4, item 11.
 *
 * main() starts libvirtd (tests/drivers/vm-real/libvirtd.sh, shared with other runs and
 * never stopping a daemon it did not start) and builds the tiny guest
 * (tests/drivers/vm-real/guest.sh: a Debian kernel and a busybox initramfs, cached). Then,
 * through the driver table only, two servers:
 *
 *  - "plain" (template nodeagent-test-tiny) ignores ACPI like a hung guest: create
 *    (it boots: its marker shows on the serial console log), status, start while
 *    running, stop (forced after graceSec), start, reboot (accepted; the guest
 *    ignores it), force-stop, snapshots while stopped and live (create, list, the
 *    limit, revert, delete), exec without a guest agent, delete;
 *  - "acpi" (template nodeagent-test-tiny-acpi) powers off on the power button like
 *    a real distribution: create, a graceful stop, start, a real reboot, delete.
 *
 * Each server's life is one cmocka test of ordered steps (run_steps) with its own
 * setup (leftovers of an earlier run removed) and teardown (the server removed): a
 * failed step ends its test there, says which step it was, and no later step runs
 * on what it left behind; the two servers do not depend on each other.
 *
 * Whether a stop was graceful or forced is read from libvirt's shut-off reason, not
 * from timings. Server ids derive from the build directory: a run killed half-way
 * is cleaned up by the next one, and two build directories never share a server.
 * Exit 77 only when libvirtd cannot run here at all (not root, not installed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "common/names.h"
#include "common/timeutil.h"
#include "guest-console.h"
#include "drivers/vm.h"


#ifndef VMR_SOURCE_DIR
#error "VMR_SOURCE_DIR: tests/drivers/vm-real in the source tree"
#endif
#ifndef VMR_BINARY_DIR
#error "VMR_BINARY_DIR: tests/drivers/vm-real in the build tree"
#endif

#define URI "qemu:///system"
#define TEMPLATE_PLAIN "nodeagent-test-tiny"     /* guest.sh: ignores ACPI */
#define TEMPLATE_ACPI "nodeagent-test-tiny-acpi" /* guest.sh: powers off on the button */
#define IMAGE_SLUG "busybox-1"
#define RAM_MB 256
#define STOP_GRACE_SEC 3
#define BOOT_TIMEOUT_MS (180u * 1000)    /* TCG on 2 busy cores: boots take 5-15 s */
#define ACPI_GRACE_SEC 120              /* the acpi guest powers off in about a second */
#define EVENT_TIMEOUT_MS (15u * 1000)
#define AGENT_TIMEOUT_SEC 3
#define EXEC_BOUND_SEC 60                /* GUEST_AGENT_UNAVAILABLE must come well before */
#define LIBVIRTD_DIR_DEFAULT "/run/nodeagent-vmreal"

/* ---- what the run measured (printed at the end) ------------------------------ */

#define MAX_TIMINGS 32
static struct {
        char what[64];
        double sec;
} timings[MAX_TIMINGS];
static int n_timings;

static void timing(const char *what, uint64_t since_us)
{
        double sec = (double)(na_now_mono_us() - since_us) / 1e6;
        if (n_timings < MAX_TIMINGS) {
                snprintf(timings[n_timings].what, sizeof(timings[0].what), "%s", what);
                timings[n_timings++].sec = sec;
        }
        print_message("[ timing   ] %-40s %7.2f s\n", what, sec);
}

/* ---- lifecycle events from the driver ------------------------------------------ */

#define MAX_EVENTS 256
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cond = PTHREAD_COND_INITIALIZER;
static struct {
        char id[PROTO_VPS_ID_LEN + 1];
        enum proto_vps_state state;
} events[MAX_EVENTS];
static int n_events;

static void on_state(void *userdata, const char *id, enum proto_vps_state state)
{
        pthread_mutex_lock(&ev_lock);
        if (n_events < MAX_EVENTS) {
                snprintf(events[n_events].id, sizeof(events[0].id), "%s", id);
                events[n_events++].state = state;
        }
        pthread_cond_broadcast(&ev_cond);
        pthread_mutex_unlock(&ev_lock);
}

static int events_mark(void)
{
        pthread_mutex_lock(&ev_lock);
        int n = n_events;
        pthread_mutex_unlock(&ev_lock);
        return n;
}

/* Whether an event (id, state) arrives at index >= from within the timeout. */
static bool wait_event(int from, const char *id, enum proto_vps_state state)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += EVENT_TIMEOUT_MS / 1000;
        bool found = false;
        pthread_mutex_lock(&ev_lock);
        for (;;) {
                for (int i = from; i < n_events && !found; i++)
                        found = streq(events[i].id, id) && events[i].state == state;
                if (found || pthread_cond_timedwait(&ev_cond, &ev_lock, &until) == ETIMEDOUT)
                        break;
        }
        for (int i = from; i < n_events && !found; i++)
                found = streq(events[i].id, id) && events[i].state == state;
        pthread_mutex_unlock(&ev_lock);
        return found;
}

/* ---- progress stages ------------------------------------------------------------- */

struct stages {
        char seen[16][32];
        int n;
};

static void rec_stage(void *userdata, const char *stage, int percent, const char *message)
{
        struct stages *s = userdata;
        if (stage && (s->n == 0 || !streq(s->seen[s->n - 1], stage)) && s->n < 16)
                snprintf(s->seen[s->n++], sizeof(s->seen[0]), "%s", stage);
}

/* ---- the run's shared state -------------------------------------------------------- */

struct server {
        const char *label;           /* "plain", "acpi" */
        const char *template_id;
        char id[PROTO_VPS_ID_LEN + 1];
        char domain[64];
        char disk_path[700];
        char console_log[700];       /* where vm.h says the serial console is logged */
        struct vmr_console *console; /* while it runs */
        /* Its life as ordered steps (run_steps): the step running, how many passed. */
        const char *step;
        size_t n_steps, steps_done;
};

static struct {
        struct server plain, acpi;
        char pool[64];
        char guest_dir[512];
        char libvirtd_dir[512];
        char state_dir[512];
        char templates_file[600];

        const struct vm_driver *vm;
        struct vm_conn *conn;
        virConnectPtr virt;          /* the test's own connection: console and checks */
        struct vmr_boots boots;      /* every boot seen, both servers */
} T = {
        .plain = { .label = "plain", .template_id = TEMPLATE_PLAIN },
        .acpi = { .label = "acpi", .template_id = TEMPLATE_ACPI },
};

static const char *err_text(const struct na_error *e, char *buf, size_t len)
{
        _cleanup_free_ char *d = e->details ? json_dumps(e->details, JSON_COMPACT) : NULL;
        snprintf(buf, len, "%s: %s%s%s", e->code ? e->code : "(no code)", e->message, d ? " " : "", d ? d : "");
        return buf;
}

/* A driver call that must succeed; on failure the message says why. */
#define OK(call)                                                                           \
        do {                                                                               \
                struct na_error *_e = &err;                                                \
                int _r = (call);                                                           \
                if (_r != 0) {                                                             \
                        char _b[1024];                                                     \
                        fail_msg("%s = %d: %s", #call, _r, err_text(_e, _b, sizeof(_b)));  \
                }                                                                          \
        } while (0)

/* A driver call that must fail with this code. */
#define FAILS_WITH(call, want)                                                             \
        do {                                                                               \
                na_error_clear(&err);                                                      \
                int _r = (call);                                                           \
                if (_r >= 0)                                                               \
                        fail_msg("%s succeeded; expected %s", #call, want);                \
                if (!err.code || !streq(err.code, want)) {                                 \
                        char _b[1024];                                                     \
                        fail_msg("%s: expected %s, got %s", #call, want,                   \
                                 err_text(&err, _b, sizeof(_b)));                          \
                }                                                                          \
                na_error_clear(&err);                                                      \
        } while (0)

/* ---- helpers ------------------------------------------------------------------------ */

/* Run a program (exec form, never a shell) with our stdout/stderr; its exit status. */
static int run(char *const argv[])
{
        pid_t pid;
        int r = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
        if (r != 0) {
                fprintf(stderr, "vm-real: spawn %s: %s\n", argv[0], strerror(r));
                return -1;
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (flag == FTW_DP || flag == FTW_D)
                rmdir(path);
        else
                unlink(path);
        return 0;
}

/* rm -r of a directory of ours (below the build tree). */
static void rm_tree(const char *path)
{
        if (strncmp(path, VMR_BINARY_DIR "/", strlen(VMR_BINARY_DIR) + 1) != 0)
                return;
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 0x100000001b3ULL;
        }
        return h;
}

/* A version 4 UUID of the build directory and a salt: the same every run, distinct per build. */
static void derive_id(struct server *srv, const char *salt)
{
        uint64_t a = fnv1a(salt, fnv1a(VMR_BINARY_DIR, 0xcbf29ce484222325ULL)), b = fnv1a(VMR_BINARY_DIR, a ^ 0x5bd1e995ULL);
        snprintf(srv->id, sizeof(srv->id), "7e57%04x-%04x-4%03x-8%03x-%012llx", (unsigned)(a >> 48) & 0xffff,
                 (unsigned)(a >> 32) & 0xffff, (unsigned)(a >> 20) & 0xfff, (unsigned)(a >> 8) & 0xfff,
                 (unsigned long long)(b & 0xffffffffffffULL));
        na_vps_domain_name(srv->id, srv->domain, sizeof(srv->domain));
}

static void silent(void *userdata, virErrorPtr e)
{
}

static virDomainPtr lookup_domain(const struct server *srv)
{
        virDomainPtr d = virDomainLookupByName(T.virt, srv->domain);
        if (!d)
                virResetLastError();
        return d;
}

/* libvirt's own state and reason for the domain (why it is shut off, say). */
static void virt_state(const struct server *srv, int *state, int *reason)
{
        virDomainPtr d = lookup_domain(srv);
        assert_non_null(d);
        int r = virDomainGetState(d, state, reason, 0);
        virDomainFree(d);
        assert_int_equal(r, 0);
}

static void assert_shutoff_reason(const struct server *srv, int want, const char *what)
{
        int state = 0, reason = 0;
        virt_state(srv, &state, &reason);
        if (state != VIR_DOMAIN_SHUTOFF || reason != want)
                fail_msg("%s: %s: libvirt state %d reason %d, expected shut off (%d) with reason %d (%s)", srv->label,
                         what, state, reason, VIR_DOMAIN_SHUTOFF, want,
                         want == VIR_DOMAIN_SHUTOFF_SHUTDOWN ? "the guest shut down" : "destroyed: forced off");
}

static void console_close(struct server *srv)
{
        vmr_console_close(srv->console);
        srv->console = NULL;
}

/* Follow the serial console of the (running) server. */
static void console_open(struct server *srv)
{
        console_close(srv);
        virDomainPtr d = lookup_domain(srv);
        assert_non_null(d);
        char ebuf[512];
        const char *kind = NULL;
        int r = vmr_console_open(d, &srv->console, &kind, ebuf, sizeof(ebuf));
        virDomainFree(d);
        if (r < 0)
                fail_msg("%s: serial console of %s: %s", srv->label, srv->domain, ebuf);
        /* vm.h: the serial console is logged to <storage_dir>/<id>-console.log. */
        if (!streq(kind, "log file") || !streq(vmr_console_path(srv->console), srv->console_log))
                fail_msg("%s: serial console: the driver documents a log file %s; the domain has a %s %s", srv->label,
                         srv->console_log, kind, vmr_console_path(srv->console));
}

/* Wait for a boot not seen before on the server's console; record it. */
static void expect_new_boot(struct server *srv, const char *what, uint64_t since_us)
{
        char boot[VMR_BOOT_ID_LEN + 1];
        int r = vmr_console_wait_boot(srv->console, &T.boots, BOOT_TIMEOUT_MS, boot);
        if (r < 0) {
                char tail[600];
                vmr_console_tail(srv->console, tail, sizeof(tail));
                fail_msg("%s: %s: no boot marker on the serial console (%s); last output: [%s]", srv->label, what,
                         r == -EPIPE ? "the console ended" : "timed out", tail);
        }
        vmr_boots_add(&T.boots, boot);
        char label[96];
        snprintf(label, sizeof(label), "%s: %s: to boot marker", srv->label, what);
        timing(label, since_us);
}

static enum proto_vps_state status_state(const struct server *srv)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_status st;
        OK(T.vm->status(T.conn, srv->id, &st, &err));
        return st.state;
}

static void assert_state(enum proto_vps_state got, enum proto_vps_state want, const char *what)
{
        if (got != want)
                fail_msg("%s: state %s, expected %s", what, proto_vps_state_name(got), proto_vps_state_name(want));
}

static struct vm_create_spec create_spec(const struct server *srv)
{
        struct vm_create_spec spec = {
                .id = srv->id,
                .name = srv->label,
                .hostname = srv->label,
                /*
                 * No speed limit: libvirt's <bandwidth> puts an sfq qdisc under htb, and
                 * kernels without sch_sfq (this machine's) refuse it, so the domain would
                 * not start. tests/drivers/vm covers the XML of the limit.
                 */
                .plan = { .cpu_cores = 1, .cpu_threads = 1, .ram_mb = RAM_MB, .storage_mb = 256,
                          .network_speed_mbps = 0, .bandwidth_limit_gb = 0, .max_snapshots = 3 },
                .tmpl = { .id = srv->template_id, .image_slug = IMAGE_SLUG, .os = PROTO_VPS_OS_LINUX },
                .password = "Secret#123",
        };
        /* One TEST-NET-3 address per server: the node refuses a shared one. */
        char text[96];
        snprintf(text, sizeof(text), "{\"ipv4\": [{\"address\": \"203.0.113.%u\", \"prefix\": 24}]}",
                 (unsigned)(strtoul(srv->id + 24, NULL, 16) % 250 + 2));
        _cleanup_json_ json_t *doc = json_loads(text, 0, NULL);
        struct na_error err = NA_ERROR_INIT;
        assert_non_null(doc);
        assert_int_equal(proto_vps_network_decode(doc, "network", &spec.network, &err), 0);
        return spec;
}

static bool inventory_has(const struct server *srv, const char *state)
{
        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *inv = NULL;
        OK(T.vm->inventory(T.conn, &inv, &err));
        size_t i;
        json_t *e;
        json_array_foreach(inv, i, e)
                if (streq_ptr(json_string_value(json_object_get(e, "id")), srv->id))
                        return !state || streq_ptr(json_string_value(json_object_get(e, "state")), state);
        return false;
}

static void power(struct server *srv, enum proto_vps_power_action action, unsigned grace_sec,
                  enum proto_vps_state want, const char *label)
{
        struct na_error err = NA_ERROR_INIT;
        enum proto_vps_state ps;
        char what[96];
        snprintf(what, sizeof(what), "%s: %s", srv->label, label);
        uint64_t t0 = na_now_mono_us();
        OK(T.vm->power(T.conn, srv->id, action, grace_sec, NULL, &ps, &err));
        timing(what, t0);
        assert_state(ps, want, what);
}

/* Create the server, see it boot (marker: acpi=on|off), the stages, a TCG domain. */
static void create_and_boot(struct server *srv, bool acpi)
{
        struct na_error err = NA_ERROR_INIT;
        struct stages st = { 0 };
        struct na_progress progress = { .stage = rec_stage, .userdata = &st };
        struct vm_create_spec spec = create_spec(srv);
        struct proto_vps_server out;
        int mark = events_mark();
        char what[64];
        snprintf(what, sizeof(what), "%s: create (call)", srv->label);

        uint64_t t0 = na_now_mono_us();
        OK(T.vm->create(T.conn, &spec, &progress, &out, &err));
        timing(what, t0);
        console_open(srv);

        static const char *const want[] = { "preparing-disk", "writing-image", "configuring", "booting" };
        assert_int_equal(st.n, (int)ARRAY_SIZE(want));
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                assert_string_equal(st.seen[i], want[i]);
        assert_string_equal(out.id, srv->id);
        assert_state(out.state, PROTO_VPS_RUNNING, "create");
        assert_int_equal(out.plan.ram_mb, RAM_MB);
        assert_string_equal(out.template_id, srv->template_id);
        assert_string_equal(out.image_slug, IMAGE_SLUG);
        assert_true(out.created_at_ms > 0);

        /* A TCG domain (nested KVM does not boot here), with its disk where the driver says. */
        virDomainPtr d = lookup_domain(srv);
        assert_non_null(d);
        _cleanup_free_ char *xml = virDomainGetXMLDesc(d, 0);
        virDomainFree(d);
        assert_non_null(xml);
        assert_non_null(strstr(xml, "<domain type='qemu'"));
        struct stat sb;
        assert_int_equal(stat(srv->disk_path, &sb), 0);

        expect_new_boot(srv, "create", t0);
        /* The guest armed (or not) its power button before printing the marker. */
        assert_true(vmr_console_wait_text(srv->console, acpi ? "acpi=on" : "acpi=off", 0));
        assert_true(wait_event(mark, srv->id, PROTO_VPS_RUNNING));

        /* Converges: a second create returns the same server and changes nothing. */
        struct proto_vps_server again;
        OK(T.vm->create(T.conn, &spec, NULL, &again, &err));
        assert_string_equal(again.id, srv->id);
        assert_int_equal(again.created_at_ms, out.created_at_ms);
        assert_state(again.state, PROTO_VPS_RUNNING, "create again");

        assert_true(T.vm->exists(T.conn, srv->id));
        assert_true(inventory_has(srv, "running"));
}

static void delete_server(struct server *srv)
{
        struct na_error err = NA_ERROR_INIT;
        char what[64];
        snprintf(what, sizeof(what), "%s: delete (running)", srv->label);
        uint64_t t0 = na_now_mono_us();
        OK(T.vm->remove(T.conn, srv->id, &err));
        timing(what, t0);
        console_close(srv);
        assert_false(T.vm->exists(T.conn, srv->id));
        virDomainPtr d = lookup_domain(srv);
        if (d) {
                virDomainFree(d);
                fail_msg("%s: domain %s still defined after delete", srv->label, srv->domain);
        }
        struct stat sb;
        assert_int_not_equal(stat(srv->disk_path, &sb), 0);
        assert_false(inventory_has(srv, NULL));
        struct proto_vps_status st;
        FAILS_WITH(T.vm->status(T.conn, srv->id, &st, &err), NA_E_VPS_NOT_FOUND);
        enum proto_vps_state ps;
        FAILS_WITH(T.vm->power(T.conn, srv->id, PROTO_VPS_POWER_START, 0, NULL, &ps, &err), NA_E_VPS_NOT_FOUND);
        OK(T.vm->remove(T.conn, srv->id, &err)); /* idempotent */
}

/* ---- the steps, in order (plain_steps and acpi_steps below) ------------------------------ */

/* ---- "plain": a guest that ignores ACPI ---------------------------------------------- */

static void step_plain_create_boots(struct server *srv)
{
        create_and_boot(srv, false);
}

static void step_plain_status_and_start_converges(struct server *srv)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_status st;
        OK(T.vm->status(T.conn, srv->id, &st, &err));
        assert_state(st.state, PROTO_VPS_RUNNING, "status");
        assert_int_equal(st.memory_mb, RAM_MB);
        assert_true(st.cpu_time_ns > 0);
        assert_true(st.uptime_sec >= 0 && st.uptime_sec < 3600);

        struct proto_vps_server out;
        OK(T.vm->get_server(T.conn, srv->id, &out, &err));
        assert_state(out.state, PROTO_VPS_RUNNING, "get_server");
        assert_string_equal(out.hostname, srv->label);
        assert_true(out.mac[0] != '\0');

        /* Starting a running server succeeds and leaves it as it is (no new boot). */
        power(srv, PROTO_VPS_POWER_START, 0, PROTO_VPS_RUNNING, "start while running");
        char boot[VMR_BOOT_ID_LEN + 1];
        assert_int_equal(vmr_console_wait_boot(srv->console, &T.boots, 0, boot), -ETIMEDOUT);
}

static void step_plain_stop_forced_after_grace(struct server *srv)
{
        int mark = events_mark();
        uint64_t t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_STOP, STOP_GRACE_SEC, PROTO_VPS_STOPPED, "stop (ACPI ignored)");
        /* The guest ignored the power button: the driver waited graceSec, then forced it off. */
        assert_true(na_now_mono_us() - t0 >= (uint64_t)STOP_GRACE_SEC * NA_USEC_PER_SEC);
        assert_shutoff_reason(srv, VIR_DOMAIN_SHUTOFF_DESTROYED, "stop");
        assert_false(vmr_console_wait_text(srv->console, "NODEAGENT-GUEST-POWER-BUTTON", 0));
        console_close(srv);
        assert_state(status_state(srv), PROTO_VPS_STOPPED, "status after stop");
        assert_true(wait_event(mark, srv->id, PROTO_VPS_STOPPED));

        /* Converges: stopping a stopped server succeeds. */
        power(srv, PROTO_VPS_POWER_STOP, STOP_GRACE_SEC, PROTO_VPS_STOPPED, "stop again");
        assert_true(inventory_has(srv, "stopped"));
}

static void step_plain_start_boots(struct server *srv)
{
        int mark = events_mark();
        uint64_t t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_START, 0, PROTO_VPS_RUNNING, "start (call)");
        console_open(srv);
        expect_new_boot(srv, "start", t0);
        assert_true(wait_event(mark, srv->id, PROTO_VPS_RUNNING));
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "status after start");
}

static void step_plain_reboot_accepted(struct server *srv)
{
        /*
         * A cold reboot: this guest ignores the power button, like a hung one, so the
         * driver forces it off after graceSec and starts it again: a new boot.
         */
        uint64_t t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_REBOOT, STOP_GRACE_SEC, PROTO_VPS_RUNNING, "reboot (ACPI ignored)");
        assert_true(na_now_mono_us() - t0 >= (uint64_t)STOP_GRACE_SEC * NA_USEC_PER_SEC);
        expect_new_boot(srv, "reboot", t0);
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "status after reboot");
}

static void step_plain_force_stop(struct server *srv)
{
        int mark = events_mark();
        power(srv, PROTO_VPS_POWER_FORCE_STOP, 0, PROTO_VPS_STOPPED, "force-stop");
        assert_shutoff_reason(srv, VIR_DOMAIN_SHUTOFF_DESTROYED, "force-stop");
        console_close(srv);
        assert_state(status_state(srv), PROTO_VPS_STOPPED, "status after force-stop");
        assert_true(wait_event(mark, srv->id, PROTO_VPS_STOPPED));
        power(srv, PROTO_VPS_POWER_FORCE_STOP, 0, PROTO_VPS_STOPPED, "force-stop again");
}

static void assert_snapshots(const struct server *srv, const char *const *ids, size_t n, const char *current)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_snapshot *list = NULL;
        size_t got = 0;
        OK(T.vm->snapshot_list(T.conn, srv->id, &list, &got, &err));
        if (got != n) {
                free(list);
                fail_msg("snapshot list: %zu snapshots, expected %zu", got, n);
        }
        for (size_t i = 0; i < n; i++) {
                bool same = streq(list[i].snapshot_id, ids[i]);
                bool cur = list[i].current == (current && streq(ids[i], current));
                if (!same || !cur) {
                        char msg[256];
                        snprintf(msg, sizeof(msg), "snapshot list[%zu]: %s (current %d), expected %s", i,
                                 list[i].snapshot_id, list[i].current, ids[i]);
                        free(list);
                        fail_msg("%s", msg);
                }
        }
        free(list);
}

static void step_plain_snapshots(struct server *srv)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_snapshot s1, s1again, s2, s3;
        static const char *const one[] = { "s1" };
        static const char *const two[] = { "s1", "s2" };
        static const char *const only_s2[] = { "s2" };

        /* Stopped server: an internal snapshot of the qcow2 disk. */
        assert_state(status_state(srv), PROTO_VPS_STOPPED, "before snapshots");
        uint64_t t0 = na_now_mono_us();
        OK(T.vm->snapshot_create(T.conn, srv->id, "s1", "while stopped", 3, &s1, &err));
        timing("plain: snapshot create (stopped)", t0);
        assert_string_equal(s1.snapshot_id, "s1");
        assert_string_equal(s1.name, "while stopped");
        assert_true(s1.created_at_ms > 0);
        OK(T.vm->snapshot_create(T.conn, srv->id, "s1", "while stopped", 3, &s1again, &err));
        assert_int_equal(s1again.created_at_ms, s1.created_at_ms); /* the same one: converged */
        assert_snapshots(srv, one, 1, "s1");

        /* Running server: a live internal snapshot (memory and disk). */
        t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_START, 0, PROTO_VPS_RUNNING, "start for snapshots");
        console_open(srv);
        expect_new_boot(srv, "start for snapshots", t0);
        t0 = na_now_mono_us();
        OK(T.vm->snapshot_create(T.conn, srv->id, "s2", "while running", 3, &s2, &err));
        timing("plain: snapshot create (running, live)", t0);
        assert_string_equal(s2.snapshot_id, "s2");
        assert_true(s2.current);
        assert_snapshots(srv, two, 2, "s2");
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "after a live snapshot");

        /* maxSnapshots: two exist and the plan allows two. */
        FAILS_WITH(T.vm->snapshot_create(T.conn, srv->id, "s3", "one too many", 2, &s3, &err), NA_E_SNAPSHOT_LIMIT);
        assert_snapshots(srv, two, 2, "s2");

        /* Revert to the stopped snapshot: the server is as it was then, stopped. */
        t0 = na_now_mono_us();
        OK(T.vm->snapshot_revert(T.conn, srv->id, "s1", &err));
        timing("plain: snapshot revert (to stopped)", t0);
        assert_state(status_state(srv), PROTO_VPS_STOPPED, "after revert to s1");
        console_close(srv);
        assert_snapshots(srv, two, 2, "s1");

        /* Revert to the live snapshot: running again from its memory, without a boot. */
        t0 = na_now_mono_us();
        OK(T.vm->snapshot_revert(T.conn, srv->id, "s2", &err));
        timing("plain: snapshot revert (to running)", t0);
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "after revert to s2");
        console_open(srv);
        assert_snapshots(srv, two, 2, "s2");

        FAILS_WITH(T.vm->snapshot_revert(T.conn, srv->id, "nope", &err), NA_E_SNAPSHOT_NOT_FOUND);

        t0 = na_now_mono_us();
        OK(T.vm->snapshot_delete(T.conn, srv->id, "s1", &err));
        timing("plain: snapshot delete", t0);
        assert_snapshots(srv, only_s2, 1, "s2");
        OK(T.vm->snapshot_delete(T.conn, srv->id, "s2", &err));
        assert_snapshots(srv, NULL, 0, NULL);
        OK(T.vm->snapshot_delete(T.conn, srv->id, "s2", &err)); /* deleted before: converged */
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "after deleting snapshots");
}

static void step_plain_exec_without_agent(struct server *srv)
{
        struct na_error err = NA_ERROR_INIT;
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "before exec");
        char *const argv[] = { (char *)"/bin/true", NULL };
        struct proto_vps_exec_result res = { 0 };
        uint64_t t0 = na_now_mono_us();
        int r = T.vm->exec(T.conn, srv->id, argv, 10, NULL, &res, &err);
        uint64_t took = na_now_mono_us() - t0;
        timing("plain: exec without a guest agent", t0);
        proto_vps_exec_result_clear(&res);
        assert_true(r < 0);
        char b[1024];
        if (!err.code || !streq(err.code, NA_E_GUEST_AGENT))
                fail_msg("exec: expected %s, got %s", NA_E_GUEST_AGENT, err_text(&err, b, sizeof(b)));
        na_error_clear(&err);
        /* Within a bound: an absent agent never holds a job for long. */
        assert_true(took < (uint64_t)EXEC_BOUND_SEC * NA_USEC_PER_SEC);
}

static void step_delete(struct server *srv)
{
        delete_server(srv);
}

/* ---- "acpi": a guest that powers off on the power button ------------------------------ */

static void step_acpi_create_boots(struct server *srv)
{
        create_and_boot(srv, true);
}

static void step_acpi_stop_graceful(struct server *srv)
{
        int mark = events_mark();
        power(srv, PROTO_VPS_POWER_STOP, ACPI_GRACE_SEC, PROTO_VPS_STOPPED, "stop (graceful)");
        /* The guest saw the button and shut down by itself: nothing was forced. */
        assert_true(vmr_console_wait_text(srv->console, "NODEAGENT-GUEST-POWER-BUTTON", 10000));
        assert_shutoff_reason(srv, VIR_DOMAIN_SHUTOFF_SHUTDOWN, "stop");
        console_close(srv);
        assert_true(wait_event(mark, srv->id, PROTO_VPS_STOPPED));
        assert_state(status_state(srv), PROTO_VPS_STOPPED, "status after stop");
}

static void step_acpi_start_and_reboot(struct server *srv)
{
        uint64_t t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_START, 0, PROTO_VPS_RUNNING, "start (call)");
        console_open(srv);
        expect_new_boot(srv, "start", t0);

        /* A real reboot: the guest powers off on the button, libvirt starts it again. */
        t0 = na_now_mono_us();
        power(srv, PROTO_VPS_POWER_REBOOT, STOP_GRACE_SEC, PROTO_VPS_RUNNING, "reboot (call)");
        expect_new_boot(srv, "reboot", t0);
        assert_state(status_state(srv), PROTO_VPS_RUNNING, "status after reboot");
}

/* ---- setup, teardown, main ------------------------------------------------------------ */

static void server_paths(struct server *srv)
{
        snprintf(srv->disk_path, sizeof(srv->disk_path), "%s/vps/disks/%s.qcow2", T.state_dir, srv->id);
        snprintf(srv->console_log, sizeof(srv->console_log), "%s/vps/disks/%s-console.log", T.state_dir, srv->id);
}

static int group_setup(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        snprintf(T.state_dir, sizeof(T.state_dir), "%s/state", VMR_BINARY_DIR);
        rm_tree(T.state_dir);
        if (mkdir(T.state_dir, 0700) < 0) {
                fprintf(stderr, "vm-real: mkdir %s: %s\n", T.state_dir, strerror(errno));
                return -1;
        }
        snprintf(T.templates_file, sizeof(T.templates_file), "%s/templates.json", T.guest_dir);
        server_paths(&T.plain);
        server_paths(&T.acpi);

        virSetErrorFunc(NULL, silent);
        T.virt = virConnectOpen(URI);
        if (!T.virt) {
                virErrorPtr e = virGetLastError();
                fprintf(stderr, "vm-real: connect to %s: %s\n", URI, e && e->message ? e->message : "?");
                return -1;
        }
        struct vm_options o = {
                .uri = URI,
                .state_dir = T.state_dir,
                .templates_file = T.templates_file,
                .images_dir = T.guest_dir,
                .storage_pool = T.pool,
                .domain_type = "qemu",
                .guest_agent_timeout_sec = AGENT_TIMEOUT_SEC,
                .on_state = on_state,
        };
        T.vm = &vm_libvirt_driver;
        if (T.vm->open(&o, &T.conn, &err) < 0) {
                fprintf(stderr, "vm-real: open the VM driver: %s\n", err.message);
                na_error_clear(&err);
                return -1;
        }
        return 0;
}

/* ---- one server's life: ordered steps between its own setup and teardown -------------- */

struct step {
        const char *name;
        void (*run)(struct server *srv);
};

static const struct step plain_steps[] = {
        { "create (it boots)", step_plain_create_boots },
        { "status; start while running converges", step_plain_status_and_start_converges },
        { "stop: forced after graceSec", step_plain_stop_forced_after_grace },
        { "start (it boots)", step_plain_start_boots },
        { "reboot: forced, a new boot", step_plain_reboot_accepted },
        { "force-stop", step_plain_force_stop },
        { "snapshots stopped and live", step_plain_snapshots },
        { "exec without a guest agent", step_plain_exec_without_agent },
        { "delete", step_delete },
};

static const struct step acpi_steps[] = {
        { "create (it boots)", step_acpi_create_boots },
        { "stop: graceful", step_acpi_stop_graceful },
        { "start and a real reboot", step_acpi_start_and_reboot },
        { "delete", step_delete },
};

/* Run the steps in order; a failed assertion leaves through cmocka, so none after it runs. */
static void run_steps(struct server *srv, const struct step *steps, size_t n)
{
        srv->n_steps = n;
        for (size_t i = 0; i < n; i++) {
                srv->step = steps[i].name;
                print_message("[ step     ] %s %zu/%zu: %s\n", srv->label, i + 1, n, steps[i].name);
                steps[i].run(srv);
                srv->steps_done = i + 1;
        }
}

static void test_plain(void **state)
{
        run_steps(*state, plain_steps, ARRAY_SIZE(plain_steps));
}

static void test_acpi(void **state)
{
        run_steps(*state, acpi_steps, ARRAY_SIZE(acpi_steps));
}

/* Before a server's life: nothing of it exists (what a run killed half-way left is removed). */
static int server_setup(void **state)
{
        struct server *srv = *state;
        struct na_error err = NA_ERROR_INIT;
        console_close(srv);
        srv->step = NULL;
        srv->n_steps = srv->steps_done = 0;
        if (T.vm->remove(T.conn, srv->id, &err) < 0) {
                fprintf(stderr, "vm-real: %s: remove a leftover %s: %s\n", srv->label, srv->id, err.message);
                na_error_clear(&err);
                return -1;
        }
        return 0;
}

/* After it, passed or not: say where it stopped, and remove the server. */
static int server_teardown(void **state)
{
        struct server *srv = *state;
        if (srv->steps_done < srv->n_steps || srv->n_steps == 0)
                print_message("[ vm-real  ] %s: FAILED at step %zu/%zu (%s); the steps after it did not run\n",
                              srv->label, srv->steps_done + 1, srv->n_steps, srv->step ? srv->step : "?");
        console_close(srv);
        struct na_error err = NA_ERROR_INIT;
        if (T.vm->remove(T.conn, srv->id, &err) < 0)
                fprintf(stderr, "vm-real: %s: teardown: remove %s: %s\n", srv->label, srv->id, err.message);
        na_error_clear(&err);
        return 0;
}

static bool all_steps_passed(void)
{
        return T.plain.n_steps && T.plain.steps_done == T.plain.n_steps && T.acpi.n_steps &&
               T.acpi.steps_done == T.acpi.n_steps;
}

static void pool_remove(void)
{
        virStoragePoolPtr p = virStoragePoolLookupByName(T.virt, T.pool);
        if (!p) {
                virResetLastError();
                return;
        }
        if (virStoragePoolIsActive(p) == 1)
                virStoragePoolDestroy(p);
        if (virStoragePoolIsPersistent(p) == 1)
                virStoragePoolUndefine(p);
        virStoragePoolFree(p);
        virResetLastError();
}

static int group_teardown(void **state)
{
        if (T.conn) {
                T.vm->close(T.conn);
                T.conn = NULL;
        }
        if (T.virt) {
                pool_remove();
                virConnectClose(T.virt);
                T.virt = NULL;
        }
        if (all_steps_passed())
                rm_tree(T.state_dir); /* kept for a look when a step failed */
        return 0;
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        uint64_t t_all = na_now_mono_us();
        derive_id(&T.plain, "plain");
        derive_id(&T.acpi, "acpi");
        snprintf(T.pool, sizeof(T.pool), "nodeagent-vmreal-%.8s", T.plain.id + 4);
        const char *g = getenv("NA_VMREAL_GUEST_DIR");
        snprintf(T.guest_dir, sizeof(T.guest_dir), "%s", g && *g ? g : VMR_BINARY_DIR "/guest");
        const char *l = getenv("NA_VMREAL_LIBVIRTD_DIR");
        snprintf(T.libvirtd_dir, sizeof(T.libvirtd_dir), "%s", l && *l ? l : LIBVIRTD_DIR_DEFAULT);
        print_message("[ vm-real  ] servers %s (plain) and %s (acpi); guest in %s; libvirtd bookkeeping in %s\n",
                      T.plain.id, T.acpi.id, T.guest_dir, T.libvirtd_dir);

        char *const start[] = { (char *)VMR_SOURCE_DIR "/libvirtd.sh", (char *)"start", T.libvirtd_dir, NULL };
        char *const stop[] = { (char *)VMR_SOURCE_DIR "/libvirtd.sh", (char *)"stop", T.libvirtd_dir, NULL };
        char *const guest[] = { (char *)VMR_SOURCE_DIR "/guest.sh", T.guest_dir, NULL };

        uint64_t t0 = na_now_mono_us();
        int r = run(start);
        if (r == 77) {
                fprintf(stderr, "vm-real: skipped: libvirtd cannot run on this machine\n");
                return 77;
        }
        if (r != 0) {
                fprintf(stderr, "vm-real: libvirtd.sh start failed (%d)\n", r);
                return 1;
        }
        timing("libvirtd ready", t0);
        t0 = na_now_mono_us();
        if ((r = run(guest)) != 0) {
                fprintf(stderr, "vm-real: guest.sh failed (%d)\n", r);
                run(stop);
                return 1;
        }
        timing("guest built (or cached)", t0);

        const struct CMUnitTest lives[] = {
                cmocka_unit_test_prestate_setup_teardown(test_plain, server_setup, server_teardown, &T.plain),
                cmocka_unit_test_prestate_setup_teardown(test_acpi, server_setup, server_teardown, &T.acpi),
        };
        int failed = cmocka_run_group_tests_name("vm-real", lives, group_setup, group_teardown);

        if (run(stop) != 0)
                fprintf(stderr, "vm-real: libvirtd.sh stop failed\n");
        timing("whole test", t_all);
        print_message("[ vm-real  ] %d boots seen; steps passed: plain %zu of %zu, acpi %zu of %zu\n", T.boots.n,
                      T.plain.steps_done, ARRAY_SIZE(plain_steps), T.acpi.steps_done, ARRAY_SIZE(acpi_steps));
        return failed == 0 && all_steps_passed() ? 0 : 1;
}
