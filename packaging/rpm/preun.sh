# SPDX-License-Identifier: GPL-2.0-or-later
# nodeagent %preun ($1: 0 on erase, 1 on upgrade).  On erase disable the unit (works
# without a running systemd) and stop the agent (it drains first) when systemd runs.
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
	systemctl --no-reload disable nodeagent.service >/dev/null 2>&1 || :
	if [ -d /run/systemd/system ]; then
		systemctl stop nodeagent.service || :
	fi
fi
exit 0
