/* Small helpers of the VM driver: progress, child processes, checksums, ids, files. */
#include "drivers/vm-util.h"

#include <ctype.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/fileio.h"
#include "common/uuid.h"

void vm_progress_stage(const struct vm_progress *p, const char *stage, int percent, const char *message)
{
        if (p && p->stage)
                p->stage(p->userdata, stage, percent, message);
}

int vm_progress_checkpoint(const struct vm_progress *p, struct na_error *err)
{
        if (p && p->checkpoint)
                return p->checkpoint(p->userdata, err);
        return 0;
}

char *vm_strdupf(const char *fmt, ...)
{
        char *s = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

int vm_id_normalize(const char *id, char buf[PROTO_VPS_ID_LEN + 1], struct na_error *err)
{
        if (!na_uuid_valid(id))
                return na_error_set(err, EINVAL, NA_E_VPS_NOT_FOUND, "vps %.40s: not a server id (a UUID)",
                                    id ? id : "(null)");
        for (size_t i = 0; i <= PROTO_VPS_ID_LEN; i++)
                buf[i] = (char)tolower((unsigned char)id[i]);
        return 0;
}

void vm_sha256_hex(const unsigned char digest[32], char hex[65])
{
        static const char digits[] = "0123456789abcdef";
        for (int i = 0; i < 32; i++) {
                hex[2 * i] = digits[digest[i] >> 4];
                hex[2 * i + 1] = digits[digest[i] & 15];
        }
        hex[64] = '\0';
}

void vm_mac_from_id(const char *id, char mac[18])
{
        unsigned char d[32];
        unsigned int n = 0;
        char lower[PROTO_VPS_ID_LEN + 1] = "";
        for (size_t i = 0; i < PROTO_VPS_ID_LEN && id[i]; i++)
                lower[i] = (char)tolower((unsigned char)id[i]);
        EVP_Digest(lower, strlen(lower), d, &n, EVP_sha256(), NULL);
        snprintf(mac, 18, "52:54:00:%02x:%02x:%02x", d[0], d[1], d[2]);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

int vm_sha256_file(const char *path, const struct vm_progress *progress, char hex[65], struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "sha256 %s: cannot start a digest", path);
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        size_t cap = 1 << 20;
        _cleanup_free_ unsigned char *buf = malloc(cap);
        if (!buf)
                return na_error_sys(err, ENOMEM, "sha256 %s", path);
        uint64_t done = 0;
        for (;;) {
                ssize_t n = read(fd, buf, cap);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return na_error_sys(err, errno, "read %s", path);
                }
                if (n == 0)
                        break;
                EVP_DigestUpdate(ctx, buf, (size_t)n);
                done += (uint64_t)n;
                if ((done & ((256u << 20) - 1)) < (uint64_t)n) { /* every 256 MiB */
                        int r = vm_progress_checkpoint(progress, err);
                        if (r < 0)
                                return r;
                }
        }
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(ctx, d, &dl);
        vm_sha256_hex(d, hex);
        return 0;
}

int vm_unlink(const char *path, struct na_error *err)
{
        if (unlink(path) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "remove %s", path);
        return 0;
}

json_t *vm_json_load(const char *path, size_t max)
{
        _cleanup_free_ char *text = NULL;
        struct na_error e = NA_ERROR_INIT;
        int r = na_read_file(path, max, &text, NULL, &e);
        na_error_clear(&e);
        return r < 0 ? NULL : json_loads(text, 0, NULL);
}

int vm_fsync_path(const char *path, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        if (fsync(fd) < 0)
                return na_error_sys(err, errno, "fsync %s", path);
        return 0;
}

int vm_image_virtual_size(const char *path, const char *format, uint64_t *ret, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open image %s", path);
        if (streq(format, "qcow2")) {
                unsigned char h[32];
                if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0)
                        return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: not a qcow2 file", path);
                uint64_t size = 0;
                for (int i = 24; i < 32; i++)
                        size = (size << 8) | h[i];
                *ret = size;
                return 0;
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "stat image %s", path);
        *ret = (uint64_t)st.st_size;
        return 0;
}

/* ---- child processes ---- */

static void append_tail(char *tail, size_t cap, size_t *len, const char *data, size_t n)
{
        /* Keep the last cap-1 bytes: messages end with the reason. */
        if (n >= cap - 1) {
                memcpy(tail, data + n - (cap - 1), cap - 1);
                *len = cap - 1;
        } else {
                if (*len + n > cap - 1) {
                        size_t drop = *len + n - (cap - 1);
                        memmove(tail, tail + drop, *len - drop);
                        *len -= drop;
                }
                memcpy(tail + *len, data, n);
                *len += n;
        }
        tail[*len] = '\0';
}

static void strip_trailing(char *s)
{
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                s[--n] = '\0';
}

int vm_spawn(char *const argv[], const struct vm_progress *progress, char **ret_out, size_t out_max,
             struct na_error *err)
{
        int outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
        if (pipe2(outp, O_CLOEXEC) < 0)
                return na_error_sys(err, errno, "run %s: pipe", argv[0]);
        if (pipe2(errp, O_CLOEXEC) < 0) {
                int e = errno;
                close(outp[0]);
                close(outp[1]);
                return na_error_sys(err, e, "run %s: pipe", argv[0]);
        }
        _cleanup_close_ int out_r = outp[0], err_r = errp[0];
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
        posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LC_ALL=C", NULL };
        pid_t pid;
        int r = posix_spawn(&pid, argv[0], &fa, &attr, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        close(outp[1]);
        close(errp[1]);
        if (r != 0)
                return na_error_sys(err, r, "run %s", argv[0]);

        _cleanup_free_ char *out = NULL;
        size_t out_len = 0, out_cap = 0;
        char tail[512] = "";
        size_t tail_len = 0;
        bool killed = false;
        struct na_error stop = NA_ERROR_INIT;
        int open_fds = 2;
        while (open_fds > 0) {
                struct pollfd p[2] = { { out_r, POLLIN, 0 }, { err_r, POLLIN, 0 } };
                int n = poll(p, 2, 500);
                if (n < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                if (!killed && vm_progress_checkpoint(progress, &stop) < 0) {
                        kill(pid, SIGKILL);
                        killed = true;
                }
                for (int i = 0; i < 2 && n > 0; i++) {
                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)) || p[i].fd < 0)
                                continue;
                        char buf[8192];
                        ssize_t k = read(p[i].fd, buf, sizeof(buf));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0) {
                                if (i == 0) {
                                        close(out_r);
                                        out_r = -1;
                                } else {
                                        close(err_r);
                                        err_r = -1;
                                }
                                open_fds--;
                                continue;
                        }
                        if (i == 1) {
                                append_tail(tail, sizeof(tail), &tail_len, buf, (size_t)k);
                        } else if (ret_out && out_len < out_max) {
                                size_t take = (size_t)k < out_max - out_len ? (size_t)k : out_max - out_len;
                                if (out_len + take + 1 > out_cap) {
                                        size_t ncap = (out_len + take + 1) * 2;
                                        char *nb = realloc(out, ncap);
                                        if (!nb) {
                                                kill(pid, SIGKILL);
                                                killed = true;
                                                r = -ENOMEM;
                                                continue;
                                        }
                                        out = nb;
                                        out_cap = ncap;
                                }
                                memcpy(out + out_len, buf, take);
                                out_len += take;
                                out[out_len] = '\0';
                        }
                }
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) {
                if (errno != EINTR) {
                        na_error_clear(&stop);
                        return na_error_sys(err, errno, "wait for %s", argv[0]);
                }
        }
        if (killed && na_error_is_set(&stop)) {
                na_error_move(err, &stop);
                return -err->errnum;
        }
        na_error_clear(&stop);
        if (r == -ENOMEM)
                return na_error_sys(err, ENOMEM, "run %s", argv[0]);
        strip_trailing(tail);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                if (ret_out) {
                        if (!out) {
                                out = strdup("");
                                if (!out)
                                        return na_error_sys(err, ENOMEM, "run %s", argv[0]);
                        }
                        *ret_out = TAKE_PTR(out);
                }
                return 0;
        }
        if (WIFEXITED(status))
                na_error_set(err, EIO, NA_E_DRIVER, "%s exited with status %d: %s", argv[0], WEXITSTATUS(status),
                             tail[0] ? tail : "(no message)");
        else
                na_error_set(err, EIO, NA_E_DRIVER, "%s killed by signal %d: %s", argv[0],
                             WIFSIGNALED(status) ? WTERMSIG(status) : 0, tail[0] ? tail : "(no message)");
        na_error_detail(err, "reason", json_string(err->message));
        return -EIO;
}
