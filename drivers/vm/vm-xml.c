/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Domain XML text: generated from a server's metadata (plan, template, metadata
 * element in our own namespace), escaped properly, and the few reads of libvirt's
 * XML the driver needs. Pure string work, no libvirt.
 */
#include "drivers/vm/vm-util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"

#define NA_XMLNS "https://nodeagent.invalid/xmlns/vps/1"

char *vm_xml_escape(const char *s)
{
        size_t n = 0;
        for (const char *p = s; *p; p++)
                n += *p == '&' ? 5 : (*p == '<' || *p == '>') ? 4 : (*p == '\'' || *p == '"') ? 6 : 1;
        char *out = malloc(n + 1), *o = out;
        if (!out)
                return NULL;
        for (const char *p = s; *p; p++) {
                const char *rep = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;"
                                  : *p == '\'' ? "&apos;" : *p == '"' ? "&quot;" : NULL;
                if (rep) {
                        size_t l = strlen(rep);
                        memcpy(o, rep, l);
                        o += l;
                } else
                        *o++ = *p;
        }
        *o = '\0';
        return out;
}

static char *unescape(const char *s, size_t len)
{
        static const struct {
                const char *ent;
                char c;
        } ents[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&apos;", '\'' }, { "&quot;", '"' } };
        char *out = malloc(len + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                bool done = false;
                if (s[i] == '&') {
                        for (size_t e = 0; e < ARRAY_SIZE(ents) && !done; e++) {
                                size_t l = strlen(ents[e].ent);
                                if (i + l <= len && strncmp(s + i, ents[e].ent, l) == 0) {
                                        *o++ = ents[e].c;
                                        i += l;
                                        done = true;
                                }
                        }
                        if (!done && i + 2 < len && s[i + 1] == '#') {
                                /* numeric character reference: &#10; or &#x0a; (ASCII only here) */
                                char *end = NULL;
                                long v = s[i + 2] == 'x' ? strtol(s + i + 3, &end, 16) : strtol(s + i + 2, &end, 10);
                                if (end && *end == ';' && v > 0 && v < 128) {
                                        *o++ = (char)v;
                                        i = (size_t)(end - s) + 1;
                                        done = true;
                                }
                        }
                }
                if (!done)
                        *o++ = s[i++];
        }
        *o = '\0';
        return out;
}

char *vm_xml_text(const char *xml, const char *tag, const char *stop)
{
        char open[64], close[64];
        snprintf(open, sizeof(open), "<%s>", tag);
        snprintf(close, sizeof(close), "</%s>", tag);
        const char *limit = stop ? strstr(xml, stop) : NULL;
        const char *a = strstr(xml, open);
        if (!a || (limit && a > limit))
                return NULL;
        a += strlen(open);
        const char *b = strstr(a, close);
        if (!b)
                return NULL;
        return unescape(a, (size_t)(b - a));
}

/* A growing string; any allocation failure sticks and makes the result NULL. */
struct sbuf {
        char *s;
        size_t len, cap;
        bool failed;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) _printf_(2, 3);
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
        if (b->failed)
                return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
                b->failed = true;
                return;
        }
        if (b->len + (size_t)n + 1 > b->cap) {
                size_t cap = (b->len + (size_t)n + 1) * 2;
                char *s = realloc(b->s, cap);
                if (!s) {
                        b->failed = true;
                        return;
                }
                b->s = s;
                b->cap = cap;
        }
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

/* Escaped copy kept for the life of the generation. */
struct esc_pool {
        char *items[16];
        size_t n;
        bool failed;
};

static const char *esc(struct esc_pool *p, const char *s)
{
        if (!s)
                return "";
        if (p->n >= ARRAY_SIZE(p->items)) {
                p->failed = true;
                return "";
        }
        char *e = vm_xml_escape(s);
        if (!e) {
                p->failed = true;
                return "";
        }
        p->items[p->n++] = e;
        return e;
}

char *vm_domain_xml(const struct vm_domain_spec *s)
{
        const struct vm_meta *m = s->meta;
        const struct proto_vps_plan *plan = &m->plan;
        struct sbuf b = { 0 };
        struct esc_pool e = { 0 };
        bool kvm = streq(s->domain_type, "kvm");
        char created[40];
        na_format_time_ms(m->created_at_ms > 0 ? (uint64_t)m->created_at_ms : 0, created, sizeof(created));

        sb_printf(&b, "<domain type='%s'>\n", esc(&e, s->domain_type));
        sb_printf(&b, "  <name>vps-%s</name>\n  <uuid>%s</uuid>\n", s->id, s->id);
        sb_printf(&b, "  <title>%s</title>\n", esc(&e, s->name));
        sb_printf(&b,
                  "  <metadata>\n"
                  "    <na:vps xmlns:na='" NA_XMLNS "'>\n"
                  "      <na:hostname>%s</na:hostname>\n"
                  "      <na:template id='%s' imageSlug='%s' os='%s'/>\n"
                  "      <na:plan cpuCores='%lld' cpuThreads='%lld' ramMB='%lld' storageMB='%lld'"
                  " networkSpeedLimitMbps='%lld' bandwidthLimitGb='%lld' maxSnapshots='%lld'/>\n"
                  "      <na:createdAt>%s</na:createdAt>\n"
                  "    </na:vps>\n"
                  "  </metadata>\n",
                  esc(&e, m->hostname), esc(&e, m->template_id), esc(&e, m->image_slug),
                  proto_vps_os_names[m->os == PROTO_VPS_OS_WINDOWS], (long long)plan->cpu_cores,
                  (long long)plan->cpu_threads, (long long)plan->ram_mb, (long long)plan->storage_mb,
                  (long long)plan->network_speed_mbps, (long long)plan->bandwidth_limit_gb,
                  (long long)plan->max_snapshots, created);
        sb_printf(&b, "  <memory unit='MiB'>%lld</memory>\n  <currentMemory unit='MiB'>%lld</currentMemory>\n",
                  (long long)plan->ram_mb, (long long)plan->ram_mb);
        sb_printf(&b, "  <vcpu placement='static'>%lld</vcpu>\n", (long long)(plan->cpu_cores * plan->cpu_threads));
        sb_printf(&b, "  <os>\n    <type arch='x86_64'>hvm</type>\n");
        if (s->kernel) {
                sb_printf(&b, "    <kernel>%s</kernel>\n", esc(&e, s->kernel));
                if (s->initrd)
                        sb_printf(&b, "    <initrd>%s</initrd>\n", esc(&e, s->initrd));
                if (s->cmdline)
                        sb_printf(&b, "    <cmdline>%s</cmdline>\n", esc(&e, s->cmdline));
        } else
                sb_printf(&b, "    <boot dev='hd'/>\n");
        sb_printf(&b, "  </os>\n  <features>\n    <acpi/>\n    <apic/>\n  </features>\n");
        sb_printf(&b, "  <cpu%s>\n    <topology sockets='1' dies='1' cores='%lld' threads='%lld'/>\n  </cpu>\n",
                  kvm ? " mode='host-passthrough' check='none' migratable='on'" : "", (long long)plan->cpu_cores,
                  (long long)plan->cpu_threads);
        sb_printf(&b, "  <clock offset='%s'/>\n", m->os == PROTO_VPS_OS_WINDOWS ? "localtime" : "utc");
        sb_printf(&b, "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n"
                      "  <on_crash>destroy</on_crash>\n");
        sb_printf(&b, "  <devices>\n");
        if (s->emulator)
                sb_printf(&b, "    <emulator>%s</emulator>\n", esc(&e, s->emulator));
        sb_printf(&b,
                  "    <disk type='file' device='disk'>\n"
                  "      <driver name='qemu' type='qcow2' discard='unmap'/>\n"
                  "      <source file='%s'/>\n"
                  "      <target dev='vda' bus='virtio'/>\n"
                  "    </disk>\n",
                  esc(&e, s->disk_path));
        if (s->seed_path)
                sb_printf(&b,
                          "    <disk type='file' device='cdrom' snapshot='no'>\n"
                          "      <driver name='qemu' type='raw'/>\n"
                          "      <source file='%s'/>\n"
                          "      <target dev='sda' bus='sata'/>\n"
                          "      <readonly/>\n"
                          "    </disk>\n",
                          esc(&e, s->seed_path));
        if (s->bridge) /* bridged: the tap, named as in routed mode, joins the operator's bridge */
                sb_printf(&b,
                          "    <interface type='bridge'>\n"
                          "      <mac address='%s'/>\n"
                          "      <source bridge='%s'/>\n",
                          s->mac, esc(&e, s->bridge));
        else /* routed: a bare tap, an L3 port of the node */
                sb_printf(&b,
                          "    <interface type='ethernet'>\n"
                          "      <mac address='%s'/>\n",
                          s->mac);
        sb_printf(&b,
                  "      <target dev='%s'%s/>\n"
                  "      <model type='virtio'/>\n",
                  esc(&e, s->ifname), s->bridge ? "" : " managed='yes'");
        if (plan->network_speed_mbps > 0) {
                long long kbytes = (long long)plan->network_speed_mbps * 125; /* Mbit/s to kB/s */
                sb_printf(&b,
                          "      <bandwidth>\n"
                          "        <inbound average='%lld'/>\n"
                          "        <outbound average='%lld'/>\n"
                          "      </bandwidth>\n",
                          kbytes, kbytes);
        }
        sb_printf(&b, "    </interface>\n");
        char console_log[600] = "";
        if (s->console_log)
                snprintf(console_log, sizeof(console_log), "      <log file='%s' append='on'/>\n",
                         esc(&e, s->console_log));
        sb_printf(&b,
                  "    <serial type='pty'>\n%s      <target port='0'/>\n    </serial>\n"
                  "    <console type='pty'>\n      <target type='serial' port='0'/>\n    </console>\n"
                  "    <channel type='unix'>\n      <target type='virtio' name='org.qemu.guest_agent.0'/>\n"
                  "    </channel>\n"
                  "    <graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'/>\n"
                  "    <rng model='virtio'>\n      <backend model='random'>/dev/urandom</backend>\n    </rng>\n"
                  "  </devices>\n</domain>\n",
                  console_log);

        for (size_t i = 0; i < e.n; i++)
                free(e.items[i]);
        if (b.failed || e.failed) {
                free(b.s);
                return NULL;
        }
        return b.s;
}
