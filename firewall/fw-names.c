/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The firewall's names (chains, shard tables) and the text of its rule userdata. */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include "firewall/fw-internal.h"

void fw_chain_name(const char *ifname, enum fw_direction dir, char buf[FW_NAME_MAX])
{
        snprintf(buf, FW_NAME_MAX, "%s-%s", ifname, dir == FW_INBOUND ? "in" : "out");
}

bool fw_chain_parse(const char *name, char ifname[NA_IFNAME_LEN], enum fw_direction *dir)
{
        /* "nav" + 12 lower-case hex digits, as na_vps_ifname() makes them */
        if (strncmp(name, "nav", 3) != 0)
                return false;
        for (int i = 3; i < 15; i++)
                if (!isxdigit((unsigned char)name[i]) || isupper((unsigned char)name[i]))
                        return false;
        if (streq(name + 15, "-in"))
                *dir = FW_INBOUND;
        else if (streq(name + 15, "-out"))
                *dir = FW_OUTBOUND;
        else
                return false;
        memcpy(ifname, name, 15);
        ifname[15] = '\0';
        return true;
}

unsigned fw_shard_of(const char *ifname, unsigned shards)
{
        uint32_t h = 2166136261u; /* FNV-1a: stable across builds and machines, cheap to redo by hand */
        for (const unsigned char *p = (const unsigned char *)ifname; *p; p++)
                h = (h ^ *p) * 16777619u;
        return shards > 1 ? h % shards : 0;
}

void fw_shard_table(const char *prefix, unsigned shard, char buf[FW_TABLE_NAME_MAX])
{
        snprintf(buf, FW_TABLE_NAME_MAX, "%.*s-%02u", FW_PREFIX_MAX, prefix, shard % 100);
}

bool fw_shard_parse(const char *prefix, const char *table, unsigned *shard)
{
        size_t n = strlen(prefix);
        if (!fw_table_is_ours(prefix, table) || !table[n])
                return false;
        *shard = (unsigned)(table[n + 1] - '0') * 10 + (unsigned)(table[n + 2] - '0');
        return true;
}

size_t fw_comment_head_len(const char *comment)
{
        size_t len = strlen(comment);
        if (len <= FW_COMMENT_HEAD)
                return len;
        size_t cut = FW_COMMENT_HEAD;
        while (cut > 0 && ((unsigned char)comment[cut] & 0xc0) == 0x80)
                cut--;
        return cut;
}

bool fw_udata_render(FILE *f, uint8_t type, const uint8_t *v, uint8_t n)
{
        if (type != FW_UDATA_META || n != 10)
                return false;
        uint32_t id;
        uint16_t pos;
        memcpy(&id, v + 4, 4);
        memcpy(&pos, v + 8, 2);
        fprintf(f, " meta{v%u %s flags %u action %s id %u position %u}", v[0], v[1] == FW_META_POLICY ? "policy" : "rule",
                v[2], v[3] <= FW_ACTION_REJECT ? proto_fw_actions[v[3]] : "?", ntohl(id), ntohs(pos));
        return true;
}
