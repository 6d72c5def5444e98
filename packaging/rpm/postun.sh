# SPDX-License-Identifier: GPL-2.0-or-later
# nodeagent %postun ($1: 0 on erase, 1 on upgrade).  systemd forgets or re-reads the
# unit, only when it is the running init; on upgrade a running agent is restarted on
# the new binary (it drains first).  /var/lib/nodeagent is left in place on erase if
# it holds anything (VM disks, images).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || :
	if [ "$1" -ge 1 ]; then
		systemctl try-restart nodeagent.service || :
	fi
fi
exit 0
