/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "fake-app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timeutil.h"

#define FAKE_APPS 8
#define FAKE_LINES 4096
#define FAKE_THREADS 64

struct fake_line {
        int64_t seq, ts_ms;
        enum proto_app_stream stream;
        char *text;
};

struct fake_one {
        char id[40];
        char *name;
        enum proto_app_state state;
        bool status_fails;
        struct fake_line *lines;
        size_t n_lines;
};

struct app_conn {
        pthread_mutex_t lock;
        struct fake_one apps[FAKE_APPS];
        size_t n;
        unsigned status_delay_ms;
        pthread_t threads[FAKE_THREADS];
        size_t n_threads;
        unsigned calls;
};

/* Under the lock: note the calling thread. */
static void called(struct app_conn *c)
{
        c->calls++;
        pthread_t self = pthread_self();
        for (size_t i = 0; i < c->n_threads; i++)
                if (pthread_equal(c->threads[i], self))
                        return;
        if (c->n_threads < FAKE_THREADS)
                c->threads[c->n_threads++] = self;
}

static struct fake_one *find(struct app_conn *c, const char *id)
{
        for (size_t i = 0; i < c->n; i++)
                if (strcasecmp(c->apps[i].id, id) == 0)
                        return &c->apps[i];
        return NULL;
}

struct app_conn *fake_app_new(void)
{
        struct app_conn *c = calloc(1, sizeof(*c));
        if (!c)
                abort();
        pthread_mutex_init(&c->lock, NULL);
        return c;
}

void fake_app_free(struct app_conn *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++) {
                for (size_t k = 0; k < c->apps[i].n_lines; k++)
                        free(c->apps[i].lines[k].text);
                free(c->apps[i].lines);
                free(c->apps[i].name);
        }
        pthread_mutex_destroy(&c->lock);
        free(c);
}

void fake_app_add(struct app_conn *c, const char *id, const char *name, enum proto_app_state state)
{
        pthread_mutex_lock(&c->lock);
        if (c->n == FAKE_APPS)
                abort();
        struct fake_one *a = &c->apps[c->n++];
        snprintf(a->id, sizeof(a->id), "%s", id);
        a->name = name ? strdup(name) : NULL;
        a->state = state;
        a->lines = calloc(FAKE_LINES, sizeof(*a->lines));
        if (!a->lines)
                abort();
        pthread_mutex_unlock(&c->lock);
}

void fake_app_line(struct app_conn *c, const char *id, enum proto_app_stream stream, const char *text)
{
        pthread_mutex_lock(&c->lock);
        struct fake_one *a = find(c, id);
        if (!a || a->n_lines == FAKE_LINES)
                abort();
        a->lines[a->n_lines] = (struct fake_line){ .seq = (int64_t)a->n_lines, .ts_ms = (int64_t)na_now_real_ms(),
                                                   .stream = stream, .text = strdup(text) };
        a->n_lines++;
        pthread_mutex_unlock(&c->lock);
}

void fake_app_fail_status(struct app_conn *c, const char *id)
{
        pthread_mutex_lock(&c->lock);
        struct fake_one *a = find(c, id);
        if (a)
                a->status_fails = true;
        pthread_mutex_unlock(&c->lock);
}

void fake_app_status_delay_ms(struct app_conn *c, unsigned ms)
{
        pthread_mutex_lock(&c->lock);
        c->status_delay_ms = ms;
        pthread_mutex_unlock(&c->lock);
}

bool fake_app_called_on(struct app_conn *c, pthread_t t)
{
        pthread_mutex_lock(&c->lock);
        bool found = false;
        for (size_t i = 0; i < c->n_threads; i++)
                if (pthread_equal(c->threads[i], t))
                        found = true;
        pthread_mutex_unlock(&c->lock);
        return found;
}

unsigned fake_app_calls(struct app_conn *c)
{
        pthread_mutex_lock(&c->lock);
        unsigned n = c->calls;
        pthread_mutex_unlock(&c->lock);
        return n;
}

static int fake_inventory(struct app_conn *c, json_t **ret, struct na_error *err)
{
        (void)err;
        pthread_mutex_lock(&c->lock);
        called(c);
        json_t *a = json_array();
        for (size_t i = 0; i < c->n; i++) {
                json_t *row = json_pack("{s:s, s:s}", "id", c->apps[i].id, "state",
                                        proto_app_state_name(c->apps[i].state));
                if (c->apps[i].name)
                        json_object_set_new(row, "name", json_string(c->apps[i].name));
                json_array_append_new(a, row);
        }
        pthread_mutex_unlock(&c->lock);
        *ret = a;
        return 0;
}

static bool fake_exists(struct app_conn *c, const char *id)
{
        pthread_mutex_lock(&c->lock);
        called(c);
        bool found = find(c, id) != NULL;
        pthread_mutex_unlock(&c->lock);
        return found;
}

static int fake_status(struct app_conn *c, const char *id, struct proto_app_status *ret, struct na_error *err)
{
        pthread_mutex_lock(&c->lock);
        called(c);
        unsigned delay = c->status_delay_ms;
        pthread_mutex_unlock(&c->lock);
        if (delay) {
                struct timespec ts = { .tv_sec = delay / 1000, .tv_nsec = (long)(delay % 1000) * 1000000L };
                nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&c->lock);
        struct fake_one *a = find(c, id);
        int r = 0;
        if (!a)
                r = na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: not found", id);
        else if (a->status_fails)
                r = na_error_set(err, EIO, NA_E_DRIVER, "app %s: status: crun state: exit status 1", id);
        else {
                int64_t i = a - c->apps;
                *ret = (struct proto_app_status){
                        .state = a->state,
                        .started_at_ms = a->state == PROTO_APP_RUNNING ? (int64_t)na_now_real_ms() - 3723000 : 0,
                        .has_exit_code = a->state == PROTO_APP_STOPPED,
                        .exit_code = 0,
                        .restarts = i,
                        .memory_mb = 100 * (i + 1),
                        .volume_used_mb = 10 * (i + 1),
                };
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

static int fake_output(struct app_conn *c, const char *id, int64_t since_seq, int64_t limit, json_t **ret,
                       struct na_error *err)
{
        pthread_mutex_lock(&c->lock);
        called(c);
        struct fake_one *a = find(c, id);
        if (!a) {
                pthread_mutex_unlock(&c->lock);
                return na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: not found", id);
        }
        size_t n = a->n_lines, from;
        if (since_seq < 0)
                from = n > (size_t)limit ? n - (size_t)limit : 0;
        else
                from = (size_t)since_seq < n ? (size_t)since_seq : n;
        size_t to = from + (size_t)limit < n ? from + (size_t)limit : n;
        struct proto_app_line *lines = calloc(to - from + 1, sizeof(*lines));
        for (size_t k = from; k < to; k++)
                lines[k - from] = (struct proto_app_line){ .seq = a->lines[k].seq, .ts_ms = a->lines[k].ts_ms,
                                                           .stream = a->lines[k].stream, .text = a->lines[k].text,
                                                           .len = strlen(a->lines[k].text) };
        *ret = proto_app_output_encode(lines, to - from, (int64_t)to);
        free(lines);
        pthread_mutex_unlock(&c->lock);
        return 0;
}

const struct app_driver fake_app_driver = {
        .name = "fake",
        .inventory = fake_inventory,
        .exists = fake_exists,
        .status = fake_status,
        .output = fake_output,
};
