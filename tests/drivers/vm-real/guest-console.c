/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The guest's serial console, read from its pty or log file (see console.h). */
#include "guest-console.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"

#define MARKER "NODEAGENT-GUEST-UP boot="
#define KEEP_BYTES (256u * 1024) /* what the guest printed, newest kept */
#define FILE_POLL_MS 100

struct vmr_console {
        char *path;           /* what is read */
        int fd;
        bool is_file;         /* a regular file: follow it; else a pty: poll it */
        int wake[2];          /* close() writes here to end the reader */
        pthread_t thread;
        bool thread_started;

        pthread_mutex_t lock;
        pthread_cond_t cond;
        char *text;           /* what was read, NUL-terminated; trimmed to KEEP_BYTES */
        size_t len;
        struct vmr_boots boots; /* markers parsed from text */
        size_t parsed;        /* text offset up to which markers were parsed */
        bool ended;
};

bool vmr_boots_has(const struct vmr_boots *b, const char *id)
{
        for (int i = 0; i < b->n; i++)
                if (streq(b->ids[i], id))
                        return true;
        return false;
}

void vmr_boots_add(struct vmr_boots *b, const char *id)
{
        if (vmr_boots_has(b, id) || b->n >= VMR_MAX_BOOTS)
                return;
        snprintf(b->ids[b->n++], sizeof(b->ids[0]), "%s", id);
}

/* Parse complete marker lines in c->text from c->parsed on; lock held. */
static void parse_locked(struct vmr_console *c)
{
        for (;;) {
                char *m = strstr(c->text + c->parsed, MARKER);
                if (!m)
                        break;
                char *id = m + strlen(MARKER);
                if ((size_t)(c->text + c->len - id) < VMR_BOOT_ID_LEN)
                        break; /* the rest of the line has not arrived yet */
                char buf[VMR_BOOT_ID_LEN + 1];
                memcpy(buf, id, VMR_BOOT_ID_LEN);
                buf[VMR_BOOT_ID_LEN] = '\0';
                vmr_boots_add(&c->boots, buf);
                c->parsed = (size_t)(id + VMR_BOOT_ID_LEN - c->text);
        }
        /* Nothing before the last partial marker can start one. */
        size_t keep = strlen(MARKER) + VMR_BOOT_ID_LEN;
        if (c->len > c->parsed + keep)
                c->parsed = c->len - keep;
}

static void append(struct vmr_console *c, const char *data, size_t n)
{
        pthread_mutex_lock(&c->lock);
        char *t = realloc(c->text, c->len + n + 1);
        if (t) {
                c->text = t;
                for (size_t i = 0; i < n; i++) /* NULs would hide what follows from strstr */
                        c->text[c->len + i] = data[i] ? data[i] : ' ';
                c->len += n;
                c->text[c->len] = '\0';
                parse_locked(c);
                if (c->len > KEEP_BYTES) {
                        size_t drop = c->len - KEEP_BYTES / 2;
                        memmove(c->text, c->text + drop, c->len - drop + 1);
                        c->len -= drop;
                        c->parsed = c->parsed > drop ? c->parsed - drop : 0;
                }
        }
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
}

static void *reader_main(void *arg)
{
        struct vmr_console *c = arg;
        char buf[4096];
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = c->wake[0], .events = POLLIN },
                        { .fd = c->fd, .events = POLLIN },
                };
                /* A regular file is always readable: poll only the wake pipe, with a period. */
                int r = poll(p, c->is_file ? 1 : 2, c->is_file ? FILE_POLL_MS : -1);
                if (r < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                if (!c->is_file && !(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                ssize_t n;
                while ((n = read(c->fd, buf, sizeof(buf))) > 0)
                        append(c, buf, (size_t)n);
                if (n < 0 && errno == EAGAIN)
                        continue;
                if (n < 0 && errno == EINTR)
                        continue;
                if (c->is_file)
                        continue; /* end of file for now: the guest may print more */
                /* A pty whose qemu went away reads EIO (or 0): the console ended. */
                break;
        }
        pthread_mutex_lock(&c->lock);
        c->ended = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

/* The value of attr='...' in the first tag named tag inside [from, to); NULL when absent. */
static char *xml_attr(const char *from, const char *to, const char *tag, const char *attr)
{
        char open[64], key[64];
        snprintf(open, sizeof(open), "<%s ", tag);
        snprintf(key, sizeof(key), "%s='", attr);
        const char *t = strstr(from, open);
        if (!t || t >= to)
                return NULL;
        const char *end = strchr(t, '>');
        const char *k = strstr(t, key);
        if (!end || !k || k > end)
                return NULL;
        k += strlen(key);
        const char *q = strchr(k, '\'');
        if (!q || q > end)
                return NULL;
        return strndup(k, (size_t)(q - k));
}

int vmr_console_open(virDomainPtr dom, struct vmr_console **ret, const char **ret_kind, char *errbuf, size_t errlen)
{
        _cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0);
        if (!xml) {
                virErrorPtr e = virGetLastError();
                snprintf(errbuf, errlen, "live domain XML: %s", e && e->message ? e->message : "unknown error");
                return -EIO;
        }
        const char *serial = strstr(xml, "<serial ");
        const char *serial_end = serial ? strstr(serial, "</serial>") : NULL;
        if (!serial || !serial_end) {
                snprintf(errbuf, errlen, "the domain has no serial port");
                return -ENOENT;
        }
        _cleanup_free_ char *type = xml_attr(serial, serial_end, "serial", "type");
        _cleanup_free_ char *log = xml_attr(serial, serial_end, "log", "file");
        _cleanup_free_ char *src = xml_attr(serial, serial_end, "source", "path");
        const char *path = NULL, *kind = NULL;
        bool is_file = true;
        if (log) {
                path = log;
                kind = "log file";
        } else if (type && streq(type, "file") && src) {
                path = src;
                kind = "file";
        } else if (type && streq(type, "pty") && src) {
                path = src;
                kind = "pty";
                is_file = false;
        } else {
                snprintf(errbuf, errlen, "serial port of type '%s' has no pty or log file to read",
                         type ? type : "?");
                return -ENOTSUP;
        }

        int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                snprintf(errbuf, errlen, "open %s %s: %s", kind, path, strerror(errno));
                return r;
        }
        if (!is_file) {
                /* Raw: no line editing, no translation; we never write to it. */
                struct termios tio;
                if (tcgetattr(fd, &tio) == 0) {
                        cfmakeraw(&tio);
                        tcsetattr(fd, TCSANOW, &tio);
                }
        }
        struct vmr_console *c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                snprintf(errbuf, errlen, "out of memory");
                return -ENOMEM;
        }
        c->fd = fd;
        c->path = strdup(path);
        c->is_file = is_file;
        c->wake[0] = c->wake[1] = -1;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->cond, NULL);
        c->text = strdup("");
        int r;
        if (!c->text || !c->path)
                r = -ENOMEM;
        else if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) < 0)
                r = -errno;
        else
                r = -pthread_create(&c->thread, NULL, reader_main, c);
        if (r < 0) {
                snprintf(errbuf, errlen, "console reader: %s", strerror(-r));
                vmr_console_close(c);
                return r;
        }
        c->thread_started = true;
        *ret = c;
        if (ret_kind)
                *ret_kind = kind;
        return 0;
}

static bool new_boot_locked(struct vmr_console *c, const struct vmr_boots *seen, char *out)
{
        for (int i = 0; i < c->boots.n; i++)
                if (!vmr_boots_has(seen, c->boots.ids[i])) {
                        snprintf(out, VMR_BOOT_ID_LEN + 1, "%s", c->boots.ids[i]);
                        return true;
                }
        return false;
}

static void deadline(struct timespec *until, unsigned timeout_ms)
{
        clock_gettime(CLOCK_REALTIME, until);
        until->tv_sec += timeout_ms / 1000;
        until->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until->tv_nsec >= 1000000000L) {
                until->tv_sec++;
                until->tv_nsec -= 1000000000L;
        }
}

bool vmr_console_wait_text(struct vmr_console *c, const char *text, unsigned timeout_ms)
{
        struct timespec until;
        deadline(&until, timeout_ms);
        pthread_mutex_lock(&c->lock);
        bool found;
        while (!(found = strstr(c->text, text) != NULL) && !c->ended)
                if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT) {
                        found = strstr(c->text, text) != NULL;
                        break;
                }
        pthread_mutex_unlock(&c->lock);
        return found;
}

int vmr_console_wait_boot(struct vmr_console *c, const struct vmr_boots *seen, unsigned timeout_ms,
                          char boot_id[VMR_BOOT_ID_LEN + 1])
{
        struct timespec until;
        deadline(&until, timeout_ms);
        int r = 0;
        pthread_mutex_lock(&c->lock);
        for (;;) {
                if (new_boot_locked(c, seen, boot_id))
                        break;
                if (c->ended) {
                        r = -EPIPE;
                        break;
                }
                if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT) {
                        r = new_boot_locked(c, seen, boot_id) ? 0 : -ETIMEDOUT;
                        break;
                }
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

void vmr_console_collect(struct vmr_console *c, struct vmr_boots *b)
{
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->boots.n; i++)
                vmr_boots_add(b, c->boots.ids[i]);
        pthread_mutex_unlock(&c->lock);
}

const char *vmr_console_path(const struct vmr_console *c)
{
        return c->path;
}

void vmr_console_tail(struct vmr_console *c, char *buf, size_t len)
{
        if (len == 0)
                return;
        pthread_mutex_lock(&c->lock);
        size_t n = c->len < len - 1 ? c->len : len - 1;
        memcpy(buf, c->text + c->len - n, n);
        buf[n] = '\0';
        pthread_mutex_unlock(&c->lock);
}

void vmr_console_close(struct vmr_console *c)
{
        if (!c)
                return;
        if (c->thread_started) {
                char b = 1;
                if (write(c->wake[1], &b, 1) < 0) {
                        /* the pipe is empty and open: a write cannot fail here */
                }
                pthread_join(c->thread, NULL);
        }
        if (c->wake[0] >= 0)
                close(c->wake[0]);
        if (c->wake[1] >= 0)
                close(c->wake[1]);
        if (c->fd >= 0)
                close(c->fd);
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c->text);
        free(c->path);
        free(c);
}
