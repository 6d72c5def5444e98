/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vps.exec through the QEMU guest agent: guest-exec (exec form: a path and its
 * arguments, never a shell) then guest-exec-status until the command exits or the
 * timeout passes. Output is capped; truncated says so. An agent that does not
 * answer within guest_agent_timeout_sec is GUEST_AGENT_UNAVAILABLE.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <libvirt/libvirt-qemu.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/json-cleanup.h"
#include "common/timeutil.h"

#define OUTPUT_CAP (1u << 20) /* per stream */

static int agent_call(struct vm_conn *c, const char *id, virDomainPtr dom, json_t *cmd, json_t **ret,
                      struct na_error *err)
{
        _cleanup_free_ char *text = json_dumps(cmd, JSON_COMPACT);
        if (!text)
                return na_error_sys(err, ENOMEM, "vps %s: guest agent command", id);
        _cleanup_free_ char *out = virDomainQemuAgentCommand(dom, text, (int)c->ga_timeout_sec, 0);
        if (!out) {
                int code = vm_virt_last_code();
                if (code == VIR_ERR_AGENT_UNRESPONSIVE || code == VIR_ERR_AGENT_UNSYNCED || code == VIR_ERR_NO_SUPPORT ||
                    code == VIR_ERR_OPERATION_UNSUPPORTED || code == VIR_ERR_OPERATION_TIMEOUT) {
                        virErrorPtr e = virGetLastError();
                        char reason[512];
                        snprintf(reason, sizeof(reason), "%s", e && e->message ? e->message : "no answer");
                        virResetLastError();
                        na_error_set(err, ETIMEDOUT, NA_E_GUEST_AGENT,
                                     "vps %s: the guest agent does not answer: %s", id, reason);
                        na_error_detail(err, "reason", json_string(reason));
                        return -ETIMEDOUT;
                }
                return vm_virt_error(err, id, "guest agent");
        }
        json_error_t jerr;
        json_t *doc = json_loads(out, 0, &jerr);
        json_t *val = doc ? json_object_get(doc, "return") : NULL;
        if (!val) {
                if (doc)
                        json_decref(doc);
                na_error_set(err, EBADMSG, NA_E_DRIVER, "vps %s: the guest agent answered nonsense", id);
                na_error_detail(err, "reason", json_string("unexpected guest agent answer"));
                return -EBADMSG;
        }
        *ret = json_incref(val);
        json_decref(doc);
        return 0;
}

static int b64(unsigned char ch)
{
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        if (ch == '+')
                return 62;
        if (ch == '/')
                return 63;
        return -1;
}

/* Append the base64 text to *buf (at most OUTPUT_CAP bytes in all); true when bytes were dropped. */
static bool append_b64(const char *text, char **buf, size_t *len)
{
        if (!text)
                return false;
        size_t n = strlen(text);
        bool dropped = false;
        char *b = realloc(*buf, *len + n * 3 / 4 + 4);
        if (!b)
                return true;
        *buf = b;
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < n; i++) {
                int v = b64((unsigned char)text[i]);
                if (v < 0)
                        continue; /* padding, newlines */
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        if (*len < OUTPUT_CAP)
                                b[(*len)++] = (char)(acc >> bits);
                        else
                                dropped = true;
                }
        }
        b[*len] = '\0';
        return dropped;
}

int vm_lv_exec(struct vm_conn *c, const char *id, char *const *argv, unsigned timeout_sec,
               const struct na_progress *progress, struct proto_vps_exec_result *ret, struct na_error *err)
{
        if (!argv || !argv[0])
                return na_error_field(err, "command", "must hold at least the program");
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        enum proto_vps_state state;
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, &state, &active, err)) < 0)
                return r;
        if (!active || state != PROTO_VPS_RUNNING) {
                na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "vps %s: exec needs a running server (it is %s)", id,
                             proto_vps_state_name(state));
                na_error_detail(err, "state", json_string(proto_vps_state_name(state)));
                return -EAGAIN;
        }

        json_t *args = json_array();
        for (size_t i = 1; argv[i]; i++)
                json_array_append_new(args, json_string(argv[i]));
        _cleanup_json_ json_t *cmd = json_pack("{s:s, s:{s:s, s:o, s:b}}", "execute", "guest-exec", "arguments",
                                               "path", argv[0], "arg", args, "capture-output", 1);
        _cleanup_json_ json_t *started = NULL;
        if (!cmd)
                return na_error_sys(err, ENOMEM, "vps %s: exec", id);
        if ((r = agent_call(c, id, dom, cmd, &started, err)) < 0)
                return na_error_prefix(err, "exec %s", argv[0]);
        json_int_t pid = json_integer_value(json_object_get(started, "pid"));

        memset(ret, 0, sizeof(*ret));
        uint64_t until = na_now_mono_us() + (uint64_t)timeout_sec * NA_USEC_PER_SEC;
        long wait_ms = 20;
        for (;;) {
                _cleanup_json_ json_t *q = json_pack("{s:s, s:{s:I}}", "execute", "guest-exec-status", "arguments",
                                                     "pid", pid);
                _cleanup_json_ json_t *st = NULL;
                if (!q)
                        return na_error_sys(err, ENOMEM, "vps %s: exec", id);
                if ((r = agent_call(c, id, dom, q, &st, err)) < 0) {
                        proto_vps_exec_result_clear(ret);
                        return na_error_prefix(err, "exec %s", argv[0]);
                }
                if (json_is_true(json_object_get(st, "exited"))) {
                        json_t *code = json_object_get(st, "exitcode"), *sig = json_object_get(st, "signal");
                        ret->exit_code = json_is_integer(code) ? (int)json_integer_value(code)
                                         : json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
                                                                : -1;
                        ret->truncated |= append_b64(json_string_value(json_object_get(st, "out-data")), &ret->out,
                                                     &ret->out_len);
                        ret->truncated |= append_b64(json_string_value(json_object_get(st, "err-data")), &ret->err,
                                                     &ret->err_len);
                        ret->truncated |= json_is_true(json_object_get(st, "out-truncated")) ||
                                          json_is_true(json_object_get(st, "err-truncated"));
                        if ((!ret->out && !(ret->out = strdup(""))) || (!ret->err && !(ret->err = strdup("")))) {
                                proto_vps_exec_result_clear(ret);
                                return na_error_sys(err, ENOMEM, "vps %s: exec", id);
                        }
                        return 0;
                }
                if (na_now_mono_us() >= until) {
                        na_error_set(err, ETIMEDOUT, NA_E_JOB_TIMEOUT,
                                     "vps %s: exec %s: still running after %u s (left running in the guest)", id,
                                     argv[0], timeout_sec);
                        return -ETIMEDOUT;
                }
                if ((r = na_progress_checkpoint(progress, err)) < 0)
                        return r;
                struct timespec ts = { wait_ms / 1000, (wait_ms % 1000) * 1000000L };
                nanosleep(&ts, NULL);
                if (wait_ms < 500)
                        wait_ms *= 2;
        }
}
