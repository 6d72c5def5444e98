/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Who nodeagent-sftpd lets in at accept (pure logic, no I/O), OpenSSH's MaxStartups
 * and PerSourceMaxStartups ideas:
 *
 *   - the source of a connection is its IPv4 address, or the /64 of its IPv6 address
 *     (one customer line holds a whole /64): sftp_admit_source;
 *   - unauthenticated connections are counted apart from logged-in sessions: at most
 *     per_source of them from one source, and over `start` of them in all a new one is
 *     dropped with a probability rising linearly from `rate` % to 100 % at `full`
 *     (random early drop, sftp_admit_drop), so a flood from many sources slows logins
 *     down rather than stopping them.
 *
 *   struct sftp_startups st;
 *   if (sftp_startups_parse("64:30:256", &st) < 0) bad;
 *   if (sftp_admit_drop(&st, unauthenticated, random() % 100)) refuse;
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define SFTP_STARTUPS_MAX 65536

struct sftp_startups {
        unsigned start, rate, full;
};

/* "start:rate:full" (1 <= start <= full <= SFTP_STARTUPS_MAX, rate 1..100) or "N" (N:100:N); -EINVAL otherwise. */
int sftp_startups_parse(const char *text, struct sftp_startups *ret);
/* Whether a new unauthenticated connection is dropped while `open` are; roll is uniform in 0..99. */
bool sftp_admit_drop(const struct sftp_startups *s, unsigned open, unsigned roll);
/*
 * The source of a printable peer address ("192.0.2.7", "2001:db8:1:2::5") for the
 * limits: "192.0.2.7", "2001:db8:1:2::/64"; an IPv4-mapped IPv6 address is its IPv4
 * address. -EINVAL when peer is not an address (buf then holds peer as is), -ENAMETOOLONG.
 */
int sftp_admit_source(const char *peer, char *buf, size_t len);
