/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Names the modules must agree on, derived from a server's or an app's id so that
 * every part (libvirt domain, tap device, veth, firewall chain, metrics) finds the
 * same object without asking another module.
 */
#pragma once
#include <stddef.h>

#define NA_IFNAME_LEN 16 /* IFNAMSIZ */

/* The tap device of a server: "nav" + the first 12 hex digits of its id ("nav6f1c2a3b4c5d"). */
int na_vps_ifname(const char *vps_id, char buf[NA_IFNAME_LEN]);
/* The host side of an app's veth pair (app networks): "nap" + the first 12 hex digits of its id. */
int na_app_ifname(const char *app_id, char buf[NA_IFNAME_LEN]);
/* The libvirt domain name of a server: "vps-<id>" (lower case); buf of at least 41. */
int na_vps_domain_name(const char *vps_id, char *buf, size_t len);
