# SPDX-License-Identifier: GPL-2.0-or-later
# nodeagent %post ($1: 1 on install, 2 on upgrade).  systemd is only told about the
# unit when it is the running init.  The service is not enabled or started on a
# first install: the configuration has placeholders to fill in first.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || :
fi
if [ "$1" -eq 1 ]; then
	echo "nodeagent: fill in /etc/nodeagent/nodeagent.conf, check it with 'nodeagentd --check-config', then 'systemctl enable --now nodeagent'."
fi
exit 0
