/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "vm-fixture.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fileio.h"
#include "drivers/vm/vm-util.h"


static void die(const char *what, const struct na_error *e)
{
        fprintf(stderr, "vm fixture: %s: %s\n", what, e ? e->message : "");
        exit(1);
}

void vmf_path(const struct vm_fixture *f, char *buf, size_t len, const char *fmt, ...)
{
        char rel[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        snprintf(buf, len, "%s/%s", f->root, rel);
}

bool vmf_exists(const char *path)
{
        return access(path, F_OK) == 0;
}

int vmf_run(char *const argv[], char *out, size_t out_len)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        pid_t pid;
        int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return -1;
        }
        size_t used = 0;
        char buf[4096];
        ssize_t n;
        while ((n = read(p[0], buf, sizeof(buf))) > 0)
                if (out && used + 1 < out_len) {
                        size_t take = (size_t)n < out_len - used - 1 ? (size_t)n : out_len - used - 1;
                        memcpy(out + used, buf, take);
                        used += take;
                }
        if (out && out_len)
                out[used] = '\0';
        close(p[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void write_file(const char *path, const char *text)
{
        struct na_error e = NA_ERROR_INIT;
        if (na_atomic_write(path, text, strlen(text), 0644, &e) < 0)
                die("write", &e);
}

static void make_image(struct vm_fixture *f, const char *rel, const char *format, const char *size, char sha[65])
{
        char path[512];
        vmf_path(f, path, sizeof(path), "images/%s", rel);
        if (streq(format, "qcow2")) {
                char *const argv[] = { (char *)"qemu-img", (char *)"create", (char *)"-q", (char *)"-f",
                                       (char *)"qcow2", path, (char *)size, NULL };
                if (vmf_run(argv, NULL, 0) != 0)
                        die("qemu-img create", NULL);
        } else {
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0 || ftruncate(fd, (off_t)strtoll(size, NULL, 10) << 20) < 0)
                        die("raw image", NULL);
                /* a little content so that images differ */
                if (write(fd, rel, strlen(rel)) < 0)
                        die("raw image", NULL);
                close(fd);
        }
        struct na_error e = NA_ERROR_INIT;
        if (na_sha256_file(path, NULL, sha, &e) < 0)
                die("sha256", &e);
}

static void on_state(void *userdata, const char *id, enum proto_vps_state st)
{
        struct vm_fixture *f = userdata;
        pthread_mutex_lock(&f->lock);
        if (f->n_events < VMF_MAX_EVENTS)
                snprintf(f->events[f->n_events++], sizeof(f->events[0]), "%s %s", id, proto_vps_state_name(st));
        pthread_mutex_unlock(&f->lock);
}

bool vmf_saw_event(struct vm_fixture *f, const char *id, const char *state)
{
        char want[64];
        snprintf(want, sizeof(want), "%s %s", id, state);
        /* Events arrive on the driver's thread: give it a moment. */
        for (int tries = 0; tries < 200; tries++) {
                pthread_mutex_lock(&f->lock);
                bool seen = false;
                for (int i = 0; i < f->n_events && !seen; i++)
                        seen = streq(f->events[i], want);
                pthread_mutex_unlock(&f->lock);
                if (seen)
                        return true;
                usleep(10000);
        }
        return false;
}

int vmf_open(struct vm_fixture *f)
{
        struct na_error e = NA_ERROR_INIT;
        if (f->vm->open(&f->opts, &f->conn, &e) < 0)
                die("open", &e);
        return 0;
}

void vmf_close(struct vm_fixture *f)
{
        f->vm->close(f->conn);
        f->conn = NULL;
}

int vmf_setup(struct vm_fixture *f, const char *node_xml)
{
        memset(f, 0, sizeof(*f));
        pthread_mutex_init(&f->lock, NULL);
        snprintf(f->root, sizeof(f->root), "/tmp/na-vm-test-XXXXXX");
        if (!mkdtemp(f->root))
                die("mkdtemp", NULL);
        vmf_path(f, f->state_dir, sizeof(f->state_dir), "state");
        vmf_path(f, f->images_dir, sizeof(f->images_dir), "images");
        vmf_path(f, f->templates_file, sizeof(f->templates_file), "templates.json");
        char win[512];
        vmf_path(f, win, sizeof(win), "images/win");
        struct na_error e = NA_ERROR_INIT;
        if (na_mkdir_p(f->state_dir, 0700, &e) < 0 || na_mkdir_p(win, 0755, &e) < 0)
                die("mkdir", &e);

        char s_deb12[65], s_deb11[65], s_win[65], s_bb[65], s_broken[65];
        make_image(f, "debian-12.qcow2", "qcow2", "64M", s_deb12);
        make_image(f, "debian-11.qcow2", "qcow2", "32M", s_deb11);
        make_image(f, "win/2022.raw", "raw", "16", s_win);
        make_image(f, "busybox.raw", "raw", "8", s_bb);
        make_image(f, "broken.raw", "raw", "8", s_broken);
        char path[512];
        vmf_path(f, path, sizeof(path), "images/vmlinuz");
        write_file(path, "kernel");
        vmf_path(f, path, sizeof(path), "images/initrd.img");
        write_file(path, "initrd");

        char templates[4096];
        snprintf(templates, sizeof(templates),
                 "[{\"id\":\"debian\",\"imageSlug\":\"12\",\"os\":\"linux\",\"format\":\"qcow2\","
                 "\"path\":\"debian-12.qcow2\",\"sha256\":\"%s\",\"inputs\":{"
                 "\"role\":{\"type\":\"string\",\"maxLength\":8,\"enum\":[\"web\",\"db\"]},"
                 "\"workers\":{\"type\":\"integer\",\"min\":1,\"max\":8},"
                 "\"tls\":{\"type\":\"boolean\"}}},"
                 "{\"id\":\"debian\",\"imageSlug\":\"11\",\"os\":\"linux\",\"format\":\"qcow2\","
                 "\"path\":\"debian-11.qcow2\",\"sha256\":\"%s\"},"
                 "{\"id\":\"windows\",\"imageSlug\":\"2022\",\"os\":\"windows\",\"format\":\"raw\","
                 "\"path\":\"win/2022.raw\",\"sha256\":\"%s\"},"
                 "{\"id\":\"busybox\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\","
                 "\"path\":\"busybox.raw\",\"sha256\":\"%s\",\"kernel\":\"vmlinuz\",\"initrd\":\"initrd.img\","
                 "\"cmdline\":\"console=ttyS0 quiet\"},"
                 "{\"id\":\"needs\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\","
                 "\"path\":\"busybox.raw\",\"sha256\":\"%s\",\"inputs\":{\"token\":{\"type\":\"string\",\"required\":true}}},"
                 "{\"id\":\"broken\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\","
                 "\"path\":\"broken.raw\",\"sha256\":\"%s\"},"
                 "{\"id\":\"missing\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\","
                 "\"path\":\"not-there.raw\",\"sha256\":\"%s\"}]",
                 s_deb12, s_deb11, s_win, s_bb, s_bb, s_deb12 /* wrong on purpose */, s_bb);
        (void)s_broken;
        write_file(f->templates_file, templates);

        const char *src = getenv("NA_SOURCE_DIR");
        char node[512];
        if (node_xml)
                snprintf(node, sizeof(node), "%s", node_xml);
        else
                snprintf(node, sizeof(node), "%s/tests/drivers/vm/node.xml", src ? src : ".");
        char real[4096];
        if (!realpath(node, real))
                die("node.xml not found (NA_SOURCE_DIR?)", NULL);
        snprintf(f->uri, sizeof(f->uri), "test://%s", real);

        f->opts = (struct vm_options){
                .uri = f->uri,
                .state_dir = f->state_dir,
                .templates_file = f->templates_file,
                .images_dir = f->images_dir,
                .start_stagger_ms = 1,
                .guest_agent_timeout_sec = 1,
                .on_state = on_state,
                .userdata = f,
        };
        f->vm = &vm_libvirt_driver;
        return vmf_open(f);
}

static void rm_rf(const char *root)
{
        char *const argv[] = { (char *)"rm", (char *)"-rf", (char *)"--one-file-system", (char *)root, NULL };
        vmf_run(argv, NULL, 0);
}

void vmf_teardown(struct vm_fixture *f)
{
        if (f->conn)
                vmf_close(f);
        if (!getenv("NA_KEEP_TMP"))
                rm_rf(f->root);
        pthread_mutex_destroy(&f->lock);
}

void vmf_network_json(const char *text, struct proto_vps_network *out)
{
        json_t *doc = json_loads(text, 0, NULL);
        struct na_error err = NA_ERROR_INIT;
        if (!doc || proto_vps_network_decode(doc, "network", out, &err) < 0) {
                fprintf(stderr, "vmf_network_json: %s: %s\n", text, doc ? err.message : "not JSON");
                abort();
        }
        json_decref(doc);
}

void vmf_network(const char *id, struct proto_vps_network *out)
{
        char hex[9] = { 0 }, text[128];
        memcpy(hex, id, 8);
        snprintf(text, sizeof(text), "{\"ipv4\": [{\"address\": \"203.0.113.%lu\", \"prefix\": 24}]}",
                 strtoul(hex, NULL, 16) % 250 + 2);
        vmf_network_json(text, out);
}

struct vm_create_spec vmf_spec(const char *id)
{
        static const struct proto_vps_plan plan = {
                .cpu_cores = 2,
                .cpu_threads = 1,
                .ram_mb = 1024,
                .storage_mb = 2048,
                .network_speed_mbps = 100,
                .bandwidth_limit_gb = 1000,
                .max_snapshots = 3,
        };
        struct vm_create_spec spec = {
                .id = id,
                .name = "web server",
                .hostname = "web1",
                .plan = plan,
                .tmpl = { .id = "debian", .image_slug = "12", .os = PROTO_VPS_OS_LINUX },
                .password = "Secret#123",
        };
        vmf_network(id, &spec.network);
        return spec;
}

int vmf_cmocka_setup(void **state)
{
        struct vm_fixture *f = calloc(1, sizeof(*f));
        if (!f)
                abort();
        vmf_setup(f, NULL);
        *state = f;
        return 0;
}

int vmf_cmocka_teardown(void **state)
{
        struct vm_fixture *f = *state;
        vmf_teardown(f);
        free(f);
        return 0;
}
