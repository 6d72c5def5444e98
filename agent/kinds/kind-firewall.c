/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vps.firewall.get and vps.firewall.set (AGENT-API 4.1; the Firewall configuration of
 * the hosting reference 2.8), over the firewall library (firewall/fw.h), which reaches
 * the kernel through netlink: no netlink header here.
 *
 * get answers what the kernel enforces now, rebuilt from the live ruleset, and emits
 * a firewall.drift event (data {"reasons": [...]}) when that differs from the stored
 * configuration or holds rules the agent did not write. set replaces the server's
 * configuration in one netlink batch and answers the configuration read back from the
 * kernel. Both answer DRIVER_ERROR "firewall disabled on this node" when [firewall]
 * enabled = false (services->fw is NULL), and VPS_NOT_FOUND for a server the node
 * does not have (services->vps_exists); a server without a configuration reads as
 * off, allow, allow, no rules.
 */
#include <stdlib.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/json-cleanup.h"
#include "firewall/fw.h"
#include "proto/firewall.h"

extern job_kind_list fw_job_kinds; /* gathered by agent/kinds/kind-registry.c */

static struct fw *firewall(struct job_ctx *ctx, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        if (s && s->vps_exists && !s->vps_exists(s, job_target_id(ctx))) {
                na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node", job_target_id(ctx));
                return NULL;
        }
        if (s && s->fw)
                return s->fw;
        na_error_set(err, ENOTSUP, NA_E_DRIVER, "vps %s: firewall disabled on this node", job_target_id(ctx));
        na_error_detail(err, "reason", json_string("firewall disabled on this node"));
        return NULL;
}

static int answer(const struct fw_config *live, json_t **ret, struct na_error *err)
{
        json_t *data = proto_fw_encode(live);
        if (!data)
                return na_error_sys(err, ENOMEM, "encode firewall configuration");
        *ret = data;
        return 0;
}

/* ---- vps.firewall.get ---- */

static int get_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct fw *fw = firewall(ctx, err);
        if (!fw)
                return -err->errnum; /* VPS_NOT_FOUND or DRIVER_ERROR, as firewall() set it */
        int r = job_checkpoint(ctx, err);
        if (r < 0)
                return r;
        const struct agent_services *s = job_services(ctx);
        const char *id = job_target_id(ctx);
        struct fw_config live;
        _cleanup_json_ json_t *reasons = NULL;
        int n = fw_check_drift(fw, id, &live, &reasons, err);
        if (n < 0)
                return n;
        if (n > 0 && s->emit_event)
                s->emit_event(s, "firewall.drift", id, json_pack("{s:O}", "reasons", reasons));
        r = answer(&live, ret, err);
        proto_fw_clear(&live);
        return r;
}

/* ---- vps.firewall.set ---- */

static int set_decode(json_t *params, void **ret, struct na_error *err)
{
        struct fw_config *cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return na_error_sys(err, ENOMEM, "firewall configuration");
        int r = proto_fw_decode(params, cfg, err);
        if (r < 0) {
                free(cfg);
                return r;
        }
        *ret = cfg;
        return 0;
}

static void set_free(void *params)
{
        proto_fw_clear(params);
        free(params);
}

static int set_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct fw *fw = firewall(ctx, err);
        if (!fw)
                return -err->errnum; /* VPS_NOT_FOUND or DRIVER_ERROR, as firewall() set it */
        int r = job_checkpoint(ctx, err);
        if (r < 0)
                return r;
        struct fw_config live;
        if ((r = fw_set(fw, job_target_id(ctx), params, &live, err)) < 0)
                return r;
        r = answer(&live, ret, err);
        proto_fw_clear(&live);
        return r;
}

static JOB_KIND(fw_get_kind, "vps.firewall.get", .target = PROTO_TARGET_VPS, .changes = false, .run = get_run);

static JOB_KIND(fw_set_kind, "vps.firewall.set", .target = PROTO_TARGET_VPS, .changes = true, .decode = set_decode,
                .free_params = set_free, .run = set_run);

job_kind_list fw_job_kinds = { &fw_get_kind, &fw_set_kind, NULL };
