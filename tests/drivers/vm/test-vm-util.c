/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM driver's helpers that need no hypervisor: domain XML, the cloud-init
 * seed documents, password hashing, the templates file (paths kept inside
 * images_dir, reload on change, checksum cache), metadata files, zstd archives
 * and child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <crypt.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/vm/vm-util.h"
#include "vm-fixture.h"

#define ID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

static void fill_meta(struct vm_meta *m)
{
        memset(m, 0, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "%s", ID1);
        snprintf(m->hostname, sizeof(m->hostname), "web1");
        m->name = strdup("Bob's <server> & co");
        m->plan = (struct proto_vps_plan){ 2, 2, 2048, 20480, 100, 1000, 3 };
        m->template_id = strdup("debian");
        m->image_slug = strdup("12");
        m->created_at_ms = 1795300000000;
        m->generation = 3;
        m->want_running = true;
}

static void test_domain_xml(void **state)
{
        struct vm_meta m;
        fill_meta(&m);
        struct vm_domain_spec s = {
                .id = ID1,
                .name = m.name,
                .domain_type = "kvm",
                .meta = &m,
                .disk_path = "/var/lib/na/disks/" ID1 ".qcow2",
                .seed_path = "/var/lib/na/disks/" ID1 "-seed.iso",
                .ifname = "nav6f1c2a3b4c5d",
                .mac = "52:54:00:01:02:03",
                .console_log = "/var/lib/na/disks/" ID1 "-console.log",
        };
        char *xml = vm_domain_xml(&s);
        assert_non_null(xml);
        const char *must[] = {
                "<domain type='kvm'>",
                "<name>vps-" ID1 "</name>",
                "<uuid>" ID1 "</uuid>",
                "<title>Bob&apos;s &lt;server&gt; &amp; co</title>",
                "<memory unit='MiB'>2048</memory>",
                "<vcpu placement='static'>4</vcpu>",
                "<topology sockets='1' dies='1' cores='2' threads='2'/>",
                "mode='host-passthrough'",
                "<boot dev='hd'/>",
                "<driver name='qemu' type='qcow2' discard='unmap'/>",
                "<source file='/var/lib/na/disks/" ID1 ".qcow2'/>",
                "<target dev='vda' bus='virtio'/>",
                "device='cdrom' snapshot='no'",
                "<readonly/>",
                "<interface type='ethernet'>",
                "<mac address='52:54:00:01:02:03'/>",
                "<target dev='nav6f1c2a3b4c5d' managed='yes'/>",
                "<inbound average='12500'/>",
                "<outbound average='12500'/>",
                "<serial type='pty'>",
                "<console type='pty'>",
                "<log file='/var/lib/na/disks/" ID1 "-console.log' append='on'/>",
                "name='org.qemu.guest_agent.0'",
                "<graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'/>",
                "<na:template id='debian' imageSlug='12' os='linux'/>",
                "<clock offset='utc'/>",
        };
        for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
                if (!strstr(xml, must[i]))
                        fail_msg("missing %s in\n%s", must[i], xml);
        assert_null(strstr(xml, "<kernel>"));
        free(xml);

        /* Direct kernel boot, TCG, no speed limit, Windows clock. */
        m.plan.network_speed_mbps = 0;
        m.os = PROTO_VPS_OS_WINDOWS;
        s.domain_type = "qemu";
        s.kernel = "/img/vmlinuz";
        s.initrd = "/img/initrd.img";
        s.cmdline = "console=ttyS0 root=/dev/vda";
        s.emulator = "/usr/bin/qemu-system-x86_64";
        xml = vm_domain_xml(&s);
        assert_non_null(strstr(xml, "<domain type='qemu'>"));
        assert_non_null(strstr(xml, "<kernel>/img/vmlinuz</kernel>"));
        assert_non_null(strstr(xml, "<initrd>/img/initrd.img</initrd>"));
        assert_non_null(strstr(xml, "<cmdline>console=ttyS0 root=/dev/vda</cmdline>"));
        assert_non_null(strstr(xml, "<emulator>/usr/bin/qemu-system-x86_64</emulator>"));
        assert_non_null(strstr(xml, "<clock offset='localtime'/>"));
        assert_null(strstr(xml, "<bandwidth>"));
        assert_null(strstr(xml, "host-passthrough"));
        assert_null(strstr(xml, "<boot dev='hd'/>"));
        free(xml);

        /* Bridged: the same tap, in the operator's bridge. */
        s.bridge = "br-public";
        xml = vm_domain_xml(&s);
        assert_non_null(strstr(xml, "<interface type='bridge'>"));
        assert_non_null(strstr(xml, "<source bridge='br-public'/>"));
        assert_non_null(strstr(xml, "<target dev='nav6f1c2a3b4c5d'/>"));
        assert_null(strstr(xml, "type='ethernet'"));
        assert_null(strstr(xml, "managed="));
        free(xml);
        vm_meta_clear(&m);

        char *t = vm_xml_text("<a><description>x &lt;&amp;&gt; &#10;y</description><domain ><description>no</description>",
                              "description", "<domain ");
        assert_string_equal(t, "x <&> \ny");
        free(t);
        assert_null(vm_xml_text("<domain ><description>no</description>", "description", "<domain "));
}

static void test_seed_documents(void **state)
{
        struct vm_meta m;
        fill_meta(&m);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_password_hash("Secret#123", &m.password_hash, &err), 0);
        assert_int_equal(strncmp(m.password_hash, "$6$", 3), 0);
        /* crypt(3) of the password with the stored salt gives the stored hash back. */
        struct crypt_data cd;
        memset(&cd, 0, sizeof(cd));
        assert_string_equal(crypt_r("Secret#123", m.password_hash, &cd), m.password_hash);
        char *second = NULL;
        assert_int_equal(vm_password_hash("Secret#123", &second, &err), 0);
        assert_string_not_equal(second, m.password_hash); /* a random salt each time */
        free(second);
        char *keys[] = { (char *)"ssh-ed25519 AAAA k1", NULL };
        assert_int_equal(vm_meta_set_keys(&m, keys, &err), 0);
        m.inputs = json_pack("{s:s}", "role", "web");

        char *md = NULL, *ud = NULL, *nc = NULL;
        assert_int_equal(vm_seed_documents(&m, "52:54:00:01:02:03", NULL, &md, &ud, &nc, &err), 0);
        _cleanup_json_ json_t *meta = json_loads(md, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(meta, "instance-id")), ID1 "-3");
        assert_string_equal(json_string_value(json_object_get(meta, "local-hostname")), "web1");
        assert_int_equal(strncmp(ud, "#cloud-config\n", 14), 0);
        _cleanup_json_ json_t *user = json_loads(ud + 14, 0, NULL);
        assert_non_null(user);
        json_t *root = json_array_get(json_object_get(user, "users"), 0);
        assert_string_equal(json_string_value(json_object_get(root, "name")), "root");
        assert_string_equal(json_string_value(json_object_get(root, "hashed_passwd")), m.password_hash);
        assert_false(json_is_true(json_object_get(root, "lock_passwd")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(root, "ssh_authorized_keys"), 0)),
                            "ssh-ed25519 AAAA k1");
        assert_true(json_is_true(json_object_get(user, "ssh_pwauth")));
        assert_null(strstr(ud, "Secret#123"));
        assert_non_null(strstr(ud, "/etc/nodeagent/inputs.json"));
        _cleanup_json_ json_t *net = json_loads(nc, 0, NULL);
        assert_int_equal(json_integer_value(json_object_get(net, "version")), 2);
        assert_non_null(strstr(nc, "52:54:00:01:02:03"));
        free(md);
        free(ud);
        free(nc);

        /* Keys only: the password login is locked. */
        free(m.password_hash);
        m.password_hash = NULL;
        assert_int_equal(vm_seed_documents(&m, "52:54:00:01:02:03", NULL, &md, &ud, &nc, &err), 0);
        _cleanup_json_ json_t *user2 = json_loads(ud + 14, 0, NULL);
        root = json_array_get(json_object_get(user2, "users"), 0);
        assert_true(json_is_true(json_object_get(root, "lock_passwd")));
        assert_null(json_object_get(root, "hashed_passwd"));
        assert_false(json_is_true(json_object_get(user2, "ssh_pwauth")));
        free(md);
        free(ud);
        free(nc);

        /* A password and no key: no ssh_authorized_keys at all (cloud-init's schema wants at least one item). */
        assert_int_equal(vm_password_hash("Secret#123", &m.password_hash, &err), 0);
        assert_int_equal(vm_meta_set_keys(&m, NULL, &err), 0);
        assert_int_equal(vm_seed_documents(&m, "52:54:00:01:02:03", NULL, &md, &ud, &nc, &err), 0);
        _cleanup_json_ json_t *user3 = json_loads(ud + 14, 0, NULL);
        root = json_array_get(json_object_get(user3, "users"), 0);
        assert_non_null(json_object_get(root, "hashed_passwd"));
        assert_null(json_object_get(root, "ssh_authorized_keys"));
        free(md);
        free(ud);
        free(nc);
        vm_meta_clear(&m);
}

static void set_network(struct vm_meta *m, const char *text)
{
        json_t *doc = json_loads(text, 0, NULL);
        struct na_error err = NA_ERROR_INIT;
        assert_non_null(doc);
        assert_int_equal(proto_vps_network_decode(doc, "network", &m->network, &err), 0);
        m->has_network = true;
        json_decref(doc);
}

static json_t *seed_network(const struct vm_meta *m, const struct vm_netcfg *net, json_t **ret_user)
{
        struct na_error err = NA_ERROR_INIT;
        char *md = NULL, *ud = NULL, *nc = NULL;
        assert_int_equal(vm_seed_documents(m, "52:54:00:01:02:03", net, &md, &ud, &nc, &err), 0);
        json_t *doc = json_loads(nc, 0, NULL);
        assert_non_null(doc);
        *ret_user = json_loads(ud + 14, 0, NULL);
        free(md);
        free(ud);
        free(nc);
        json_t *eth = json_incref(json_object_get(json_object_get(doc, "ethernets"), "primary"));
        json_decref(doc);
        assert_non_null(eth);
        return eth;
}

/* The network-config the guest boots with: static, as the mode says; DHCP for a server made before. */
static void test_seed_network(void **state)
{
        struct vm_meta m;
        fill_meta(&m);
        char *keys[] = { (char *)"ssh-ed25519 AAAA k1", NULL };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_meta_set_keys(&m, keys, &err), 0);

        /* Made before servers had a network: DHCP as it was, and no network updates. */
        json_t *user = NULL;
        json_t *eth = seed_network(&m, NULL, &user);
        assert_true(json_is_true(json_object_get(eth, "dhcp4")));
        assert_null(json_object_get(eth, "addresses"));
        assert_null(json_object_get(user, "updates"));
        json_decref(eth);
        json_decref(user);

        set_network(&m, "{\"ipv4\": [{\"address\": \"203.0.113.10\", \"prefix\": 24}],"
                        " \"ipv6\": [{\"address\": \"2001:db8:1::10\", \"prefix\": 64}],"
                        " \"dns\": [\"192.0.2.53\", \"2001:db8::53\"]}");
        /* Routed (the default): each address alone, the link-local next hop as the gateways
         * (ifupdown adds them on link; see vm-seed.c). */
        eth = seed_network(&m, NULL, &user);
        _cleanup_free_ char *text = json_dumps(eth, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(text,
                            "{\"accept-ra\":false,\"addresses\":[\"203.0.113.10/32\",\"2001:db8:1::10/128\"],"
                            "\"dhcp4\":false,\"dhcp6\":false,\"gateway4\":\"169.254.0.1\",\"gateway6\":\"fe80::1\","
                            "\"match\":{\"macaddress\":\"52:54:00:01:02:03\"},"
                            "\"nameservers\":{\"addresses\":[\"192.0.2.53\",\"2001:db8::53\"]},\"set-name\":\"eth0\"}");
        /* vps.network.set rewrites the seed under the same instance-id: read again at every boot. */
        assert_string_equal(json_string_value(json_array_get(
                                    json_object_get(json_object_get(json_object_get(user, "updates"), "network"), "when"), 0)),
                            "boot");
        json_decref(eth);
        json_decref(user);

        /* Bridged: the prefixes as given and the operator's gateways (none for v6 here). */
        struct vm_netcfg bridged = { .mode = VM_NET_BRIDGED, .bridge = "br0", .gateway4 = "203.0.113.1" };
        eth = seed_network(&m, &bridged, &user);
        _cleanup_free_ char *btext = json_dumps(json_object_get(eth, "addresses"), JSON_COMPACT);
        assert_string_equal(btext, "[\"203.0.113.10/24\",\"2001:db8:1::10/64\"]");
        assert_string_equal(json_string_value(json_object_get(eth, "gateway4")), "203.0.113.1");
        assert_null(json_object_get(eth, "gateway6"));
        assert_null(json_object_get(eth, "routes"));
        json_decref(eth);
        json_decref(user);
        vm_meta_clear(&m);
}

static void test_meta_roundtrip(void **state)
{
        char dir[] = "/tmp/na-vm-meta-XXXXXX";
        assert_non_null(mkdtemp(dir));
        struct vm_meta m, back;
        fill_meta(&m);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_password_hash("Secret#123", &m.password_hash, &err), 0);
        char *keys[] = { (char *)"ssh-ed25519 AAAA k1", (char *)"ssh-ed25519 BBBB k2", NULL };
        assert_int_equal(vm_meta_set_keys(&m, keys, &err), 0);
        snprintf(m.ssh_key_id, sizeof(m.ssh_key_id), "0c4f2d8e-1b5a-4c3d-9e7f-6a8b9c0d1e2f");
        m.kernel = strdup("/img/k");
        m.cmdline = strdup("console=ttyS0");
        m.installing = true;
        /* Without a network first (a server made before): loaded without one. */
        assert_int_equal(vm_meta_save(dir, &m, &err), 0);
        assert_int_equal(vm_meta_load(dir, ID1, &back, &err), 0);
        assert_false(back.has_network);
        vm_meta_clear(&back);
        set_network(&m, "{\"ipv6\": [{\"address\": \"2001:db8:1::10\", \"prefix\": 64}], \"dns\": [\"192.0.2.53\"]}");
        assert_int_equal(vm_meta_save(dir, &m, &err), 0);
        assert_int_equal(vm_meta_load(dir, ID1, &back, &err), 0);
        assert_true(back.has_network);
        assert_true(proto_vps_network_equal(&back.network, &m.network));
        assert_string_equal(back.name, m.name);
        assert_string_equal(back.hostname, "web1");
        assert_int_equal(back.plan.storage_mb, 20480);
        assert_string_equal(back.password_hash, m.password_hash);
        assert_int_equal(vm_meta_ssh_key_count(&back), 2);
        assert_string_equal(back.ssh_key_id, m.ssh_key_id);
        assert_string_equal(back.kernel, "/img/k");
        assert_null(back.initrd);
        assert_string_equal(back.cmdline, "console=ttyS0");
        assert_int_equal(back.generation, 3);
        assert_true(back.want_running);
        assert_true(back.installing);
        assert_int_equal(back.created_at_ms, m.created_at_ms);
        vm_meta_clear(&back);
        assert_int_equal(vm_meta_load(dir, "00000000-0000-4000-8000-000000000000", &back, &err), -ENOENT);
        assert_false(na_error_is_set(&err));
        assert_int_equal(vm_meta_remove(dir, ID1, &err), 0);
        assert_int_equal(vm_meta_load(dir, ID1, &back, &err), -ENOENT);
        vm_meta_clear(&m);
        rmdir(dir);

        char mac1[18], mac2[18], mac3[18];
        vm_mac_from_id(ID1, mac1);
        vm_mac_from_id("6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B", mac2);
        vm_mac_from_id("00000000-0000-4000-8000-000000000000", mac3);
        assert_string_equal(mac1, mac2);
        assert_string_not_equal(mac1, mac3);
        assert_int_equal(strncmp(mac1, "52:54:00:", 9), 0);
}

static const struct vm_template_fields fields = { "template.id", "template.imageSlug", "template.os", "inputs" };

static void write_text(const char *path, const char *text)
{
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_atomic_write(path, text, strlen(text), 0644, &err), 0);
}

static void test_templates(void **state)
{
        struct vm_fixture f;
        vmf_setup(&f, NULL);
        vmf_close(&f);
        char cache[512];
        vmf_path(&f, cache, sizeof(cache), "cache.json");
        struct vm_templates *t = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_templates_new(f.templates_file, f.images_dir, cache, &t, &err), 0);

        struct vm_template tp;
        assert_int_equal(vm_templates_get(t, "debian", "12", &fields, &tp, &err), 0);
        assert_string_equal(tp.format, "qcow2");
        char want[512];
        vmf_path(&f, want, sizeof(want), "images/debian-12.qcow2");
        assert_string_equal(tp.path, want);
        assert_non_null(tp.inputs);

        /* Inputs against the schema. */
        _cleanup_json_ json_t *good = json_pack("{s:s, s:i, s:b}", "role", "db", "workers", 8, "tls", 0);
        assert_int_equal(vm_template_check_inputs(&tp, good, "inputs", &err), 0);
        assert_int_equal(vm_template_check_inputs(&tp, NULL, "inputs", &err), 0);
        _cleanup_json_ json_t *bad = json_pack("{s:s, s:s, s:s, s:i}", "role", "webserver", "workers", "2", "tls",
                                               "yes", "extra", 1);
        assert_int_equal(vm_template_check_inputs(&tp, bad, "inputs", &err), -EINVAL);
        assert_non_null(json_object_get(err.details, "inputs"));
        json_t *in = json_object_get(err.details, "inputs");
        assert_non_null(json_object_get(in, "role"));
        assert_non_null(json_object_get(in, "workers"));
        assert_non_null(json_object_get(in, "tls"));
        assert_non_null(json_object_get(in, "extra"));
        na_error_clear(&err);

        /* Verified once, then from the cache (kept in a file across restarts). */
        assert_int_equal(vm_templates_verify(t, &tp, NULL, &err), 0);
        assert_true(vmf_exists(cache));
        assert_int_equal(vm_templates_verify(t, &tp, NULL, &err), 0);
        vm_template_clear(&tp);

        assert_int_equal(vm_templates_get(t, "broken", "1", &fields, &tp, &err), 0);
        assert_true(vm_templates_verify(t, &tp, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        na_error_clear(&err);
        vm_template_clear(&tp);

        /* A changed image is verified again. */
        assert_int_equal(vm_templates_get(t, "debian", "11", &fields, &tp, &err), 0);
        assert_int_equal(vm_templates_verify(t, &tp, NULL, &err), 0);
        int fd = open(tp.path, O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
        assert_true(vm_templates_verify(t, &tp, NULL, &err) < 0);
        na_error_clear(&err);
        vm_template_clear(&tp);

        assert_int_equal(vm_templates_get(t, "nope", "1", &fields, &tp, &err), -EINVAL);
        assert_non_null(json_object_get(err.details, "template"));
        na_error_clear(&err);

        /* The file is read again when it changes. */
        sleep(1);
        write_text(f.templates_file,
                   "[{\"id\":\"alpine\",\"imageSlug\":\"3\",\"os\":\"linux\",\"format\":\"raw\",\"path\":\"busybox.raw\","
                   "\"sha256\":\"0000000000000000000000000000000000000000000000000000000000000000\"}]");
        assert_int_equal(vm_templates_get(t, "alpine", "3", &fields, &tp, &err), 0);
        vm_template_clear(&tp);
        assert_int_equal(vm_templates_get(t, "debian", "12", &fields, &tp, &err), -EINVAL);
        na_error_clear(&err);

        /* Paths that leave images_dir, by name or by symbolic link. */
        sleep(1);
        write_text(f.templates_file,
                   "[{\"id\":\"x\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\",\"path\":\"../state/secret\","
                   "\"sha256\":\"0000000000000000000000000000000000000000000000000000000000000000\"}]");
        assert_true(vm_templates_get(t, "x", "1", &fields, &tp, &err) < 0);
        assert_string_equal(err.code, NA_E_INTERNAL);
        assert_non_null(strstr(err.message, "inside images_dir"));
        na_error_clear(&err);
        char link[512];
        vmf_path(&f, link, sizeof(link), "images/escape.raw");
        assert_int_equal(symlink("/etc/passwd", link), 0);
        sleep(1);
        write_text(f.templates_file,
                   "[{\"id\":\"x\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\",\"path\":\"escape.raw\","
                   "\"sha256\":\"0000000000000000000000000000000000000000000000000000000000000000\"}]");
        assert_int_equal(vm_templates_get(t, "x", "1", &fields, &tp, &err), -EINVAL);
        assert_non_null(strstr(err.message, "outside images_dir"));
        na_error_clear(&err);

        /* A broken file names the entry and the field. */
        sleep(1);
        write_text(f.templates_file, "[{\"id\":\"x\",\"imageSlug\":\"1\",\"os\":\"solaris\",\"format\":\"vmdk\"}]");
        assert_true(vm_templates_get(t, "x", "1", &fields, &tp, &err) < 0);
        assert_non_null(strstr(err.message, "0.os"));
        na_error_clear(&err);
        vm_templates_free(t);
        vmf_teardown(&f);
}

static void test_archive_and_spawn(void **state)
{
        char dir[] = "/tmp/na-vm-arch-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char src[256], packed[256], back[256];
        snprintf(src, sizeof(src), "%s/src", dir);
        snprintf(packed, sizeof(packed), "%s/src.zst", dir);
        snprintf(back, sizeof(back), "%s/back", dir);
        FILE *fp = fopen(src, "w");
        for (int i = 0; i < 200000; i++)
                fprintf(fp, "line %d of some compressible text\n", i % 1000);
        fclose(fp);
        struct na_error err = NA_ERROR_INIT;
        char sha[65], file_sha[65];
        uint64_t size = 0;
        assert_int_equal(vm_archive_compress(src, packed, NULL, NULL, sha, &size, &err), 0);
        assert_int_equal(na_sha256_file(packed, NULL, file_sha, &err), 0);
        assert_string_equal(sha, file_sha);
        struct stat st;
        assert_int_equal(stat(packed, &st), 0);
        assert_int_equal((uint64_t)st.st_size, size);
        assert_int_equal(vm_archive_decompress(packed, back, sha, NULL, &err), 0);
        char *const cmp[] = { (char *)"cmp", src, back, NULL };
        assert_int_equal(vmf_run(cmp, NULL, 0), 0);
        assert_true(vm_archive_decompress(packed, back, "00", NULL, &err) < 0);
        na_error_clear(&err);
        /* A record at the head (a skippable frame): read back, passed over by the decoder,
         * covered by the sha256; an archive without one has none. */
        char *meta = NULL;
        int mfd = open(packed, O_RDONLY | O_CLOEXEC);
        assert_int_equal(vm_archive_meta(mfd, &meta, &err), 0);
        assert_null(meta);
        close(mfd);
        char withmeta[600];
        snprintf(withmeta, sizeof(withmeta), "%s/meta.zst", dir);
        assert_int_equal(vm_archive_compress(src, withmeta, "{\"generation\":3}", NULL, sha, &size, &err), 0);
        assert_int_equal(na_sha256_file(withmeta, NULL, file_sha, &err), 0);
        assert_string_equal(sha, file_sha);
        mfd = open(withmeta, O_RDONLY | O_CLOEXEC);
        assert_int_equal(vm_archive_meta(mfd, &meta, &err), 0);
        assert_string_equal(meta, "{\"generation\":3}");
        free(meta);
        unsigned char head[16];
        char vsha[65];
        assert_int_equal(vm_archive_verify_fd(mfd, withmeta, sha, head, sizeof(head), vsha, NULL, &err), 0);
        assert_string_equal(vsha, sha);
        assert_memory_equal(head, "line 0 of some c", 16);
        close(mfd);
        assert_int_equal(vm_archive_decompress(withmeta, back, sha, NULL, &err), 0);
        assert_int_equal(vmf_run(cmp, NULL, 0), 0);
        char *const zstd_d[] = { (char *)"/usr/bin/zstd", (char *)"-q", (char *)"-t", withmeta, NULL };
        assert_int_equal(vmf_run(zstd_d, NULL, 0), 0); /* zstd itself passes over the record */

        /* A cut archive is refused. */
        assert_int_equal(truncate(packed, st.st_size / 2), 0);
        assert_true(vm_archive_decompress(packed, back, NULL, NULL, &err) < 0);
        na_error_clear(&err);

        /* Child processes: output, failure with the reason, never a shell. */
        char *out = NULL;
        char *const echo[] = { (char *)"/bin/echo", (char *)"a; echo b", NULL };
        assert_int_equal(na_spawn(echo, NULL, &out, 1024, &err), 0);
        assert_string_equal(out, "a; echo b\n");
        free(out);
        char *const fail[] = { (char *)"/bin/ls", (char *)"/nonexistent-dir", NULL };
        assert_true(na_spawn(fail, NULL, NULL, 0, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "nonexistent-dir"));
        assert_non_null(json_object_get(err.details, "reason"));
        na_error_clear(&err);
        char *const missing[] = { (char *)"/nonexistent/tool", NULL };
        assert_true(na_spawn(missing, NULL, NULL, 0, &err) < 0);
        na_error_clear(&err);
        char *const rmargv[] = { (char *)"rm", (char *)"-rf", dir, NULL };
        vmf_run(rmargv, NULL, 0);
}

static int stop_now(void *userdata, struct na_error *err)
{
        return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "stop");
}

static void test_spawn_cancel(void **state)
{
        struct na_progress p = { .checkpoint = stop_now };
        struct na_error err = NA_ERROR_INIT;
        char *const slow[] = { (char *)"/bin/sleep", (char *)"30", NULL };
        assert_true(na_spawn(slow, &p, NULL, 0, &err) < 0);
        assert_string_equal(err.code, NA_E_JOB_CANCELLED);
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_domain_xml),     cmocka_unit_test(test_seed_documents),
                cmocka_unit_test(test_seed_network),
                cmocka_unit_test(test_meta_roundtrip), cmocka_unit_test(test_templates),
                cmocka_unit_test(test_archive_and_spawn), cmocka_unit_test(test_spawn_cancel),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
