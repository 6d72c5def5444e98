/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt's event loop on a thread owned by the driver (one per process, shared by
 * every open connection): lifecycle events become (server id, state) calls of the
 * daemon's callback; a lost connection is noticed through libvirt's close
 * callback and a timer reconnects it.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <string.h>
#include <time.h>

#include "common/timeutil.h"
#include "common/uuid.h"

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static int ev_users;
static bool ev_registered;
static pthread_t ev_thread;
static atomic_bool ev_quit;

static void *ev_main(void *arg)
{
        while (!atomic_load(&ev_quit))
                if (virEventRunDefaultImpl() < 0) {
                        struct timespec ts = { 0, 10 * 1000 * 1000 };
                        nanosleep(&ts, NULL); /* never spin on a broken loop */
                }
        return NULL;
}

static void wake_cb(int timer, void *opaque)
{
}

int vm_events_acquire(struct na_error *err)
{
        pthread_mutex_lock(&ev_lock);
        if (!ev_registered) {
                if (virEventRegisterDefaultImpl() < 0) {
                        pthread_mutex_unlock(&ev_lock);
                        return vm_virt_error(err, NULL, "libvirt event loop");
                }
                ev_registered = true;
        }
        if (ev_users == 0) {
                atomic_store(&ev_quit, false);
                int r = pthread_create(&ev_thread, NULL, ev_main, NULL);
                if (r != 0) {
                        pthread_mutex_unlock(&ev_lock);
                        return na_error_sys(err, r, "libvirt event thread");
                }
        }
        ev_users++;
        pthread_mutex_unlock(&ev_lock);
        return 0;
}

void vm_events_release(void)
{
        pthread_mutex_lock(&ev_lock);
        if (ev_users > 0 && --ev_users == 0) {
                atomic_store(&ev_quit, true);
                /* A timeout of 0 fires at once and wakes the loop out of poll(). */
                int t = virEventAddTimeout(0, wake_cb, NULL, NULL);
                pthread_join(ev_thread, NULL);
                if (t >= 0)
                        virEventRemoveTimeout(t);
        }
        pthread_mutex_unlock(&ev_lock);
}

static void cb_ref(struct vm_conn *c, int delta)
{
        pthread_mutex_lock(&c->cb_lock);
        c->cb_refs += delta;
        pthread_cond_broadcast(&c->cb_cond);
        pthread_mutex_unlock(&c->cb_lock);
}

static void cb_free(void *opaque)
{
        cb_ref(opaque, -1);
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
        struct vm_conn *c = opaque;
        const char *name = virDomainGetName(dom);
        if (!name || strncmp(name, "vps-", 4) != 0 || !na_uuid_valid(name + 4))
                return 0;
        const char *id = name + 4;
        enum proto_vps_state st;
        switch (event) {
        case VIR_DOMAIN_EVENT_STARTED: {
                vm_mem_started(c, id, (int64_t)na_now_real_ms());
                /* Started by anyone (virsh too): its new tap gets its routes. A failure
                 * shows at the next start or vps.network.set, which apply the same. */
                struct na_error e = NA_ERROR_INIT;
                vm_lv_host_network_of(c, id, &e);
                na_error_clear(&e);
                st = PROTO_VPS_RUNNING;
                break;
        }
        case VIR_DOMAIN_EVENT_RESUMED:
                st = PROTO_VPS_RUNNING;
                break;
        case VIR_DOMAIN_EVENT_SUSPENDED:
        case VIR_DOMAIN_EVENT_PMSUSPENDED:
                st = PROTO_VPS_PAUSED;
                break;
        case VIR_DOMAIN_EVENT_STOPPED:
                vm_mem_started(c, id, 0);
                st = detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED ? PROTO_VPS_CRASHED : PROTO_VPS_STOPPED;
                break;
        case VIR_DOMAIN_EVENT_CRASHED:
                st = PROTO_VPS_CRASHED;
                break;
        default:
                return 0; /* defined, undefined, shutdown requested: no state of their own */
        }
        if (c->on_state && !atomic_load(&c->closing))
                c->on_state(c->userdata, id, st);
        return 0;
}

static void close_cb(virConnectPtr conn, int reason, void *opaque)
{
        struct vm_conn *c = opaque;
        atomic_store(&c->dead, true);
}

void vm_events_register(struct vm_conn *c, virConnectPtr conn)
{
        cb_ref(c, +1);
        c->lifecycle_id = virConnectDomainEventRegisterAny(conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                           VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), c, cb_free);
        if (c->lifecycle_id < 0) {
                cb_ref(c, -1);
                virResetLastError();
        }
        /*
         * No free callback here: not every driver calls it (the test driver has no link
         * to lose); once unregistered, the callback is never called again.
         */
        if (virConnectRegisterCloseCallback(conn, close_cb, c, NULL) < 0)
                virResetLastError();
}

void vm_events_deregister(struct vm_conn *c, virConnectPtr conn)
{
        if (c->lifecycle_id >= 0)
                virConnectDomainEventDeregisterAny(conn, c->lifecycle_id);
        c->lifecycle_id = -1;
        virConnectUnregisterCloseCallback(conn, close_cb);
        virResetLastError();
}

static void reconnect_cb(int timer, void *opaque)
{
        struct vm_conn *c = opaque;
        if (atomic_load(&c->closing))
                return;
        if (!atomic_load(&c->dead))
                return;
        /* vm_conn_get replaces a dead connection; the reference it hands out is dropped at once. */
        virConnectPtr conn = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (vm_conn_get(c, &conn, &e) == 0)
                virConnectClose(conn);
        na_error_clear(&e);
}

int vm_events_start_reconnect_timer(struct vm_conn *c)
{
        cb_ref(c, +1);
        c->reconnect_timer = virEventAddTimeout((int)c->reconnect_ms, reconnect_cb, c, cb_free);
        if (c->reconnect_timer < 0) {
                cb_ref(c, -1);
                virResetLastError();
                return -EIO;
        }
        return 0;
}

void vm_events_stop_reconnect_timer(struct vm_conn *c)
{
        if (c->reconnect_timer >= 0)
                virEventRemoveTimeout(c->reconnect_timer);
        c->reconnect_timer = -1;
}

bool vm_events_wait_unreferenced(struct vm_conn *c)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        pthread_mutex_lock(&c->cb_lock);
        while (c->cb_refs > 0)
                if (pthread_cond_timedwait(&c->cb_cond, &c->cb_lock, &until) != 0)
                        break;
        bool done = c->cb_refs <= 0;
        pthread_mutex_unlock(&c->cb_lock);
        return done;
}
