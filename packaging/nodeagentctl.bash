# SPDX-License-Identifier: GPL-2.0-or-later
# bash completion for nodeagentctl(8), installed as
# /usr/share/bash-completion/completions/nodeagentctl.  Commands, each command's own
# options, files for --config and --socket, and for `logs` the ids of the node's apps
# (asked of the running agent with `nodeagentctl apps --json`; nothing when it does
# not answer).  tests/ctl/test-ctl-help.sh checks it against `nodeagentctl --help`.

_nodeagentctl_apps() {
	# App ids from the agent's answer; -c/-s as typed so far go along.
	"$1" "${@:2}" apps --json 2>/dev/null |
		sed -n 's/^ *"id": *"\([0-9a-f-]\{36\}\)".*/\1/p'
}

_nodeagentctl() {
	local cur prev words cword
	_init_completion || return

	local commands="status jobs run apps logs drain help"
	local global="-c --config -s --socket -j --json -h --help"
	local cmd="" i conn=()
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-c | --config | -s | --socket)
			conn+=("${words[i]}" "${words[i + 1]}")
			((i++))
			;;
		-t | --target | -p | --params | -T | --timeout | --since | -n | --lines) ((i++)) ;;
		-*) ;;
		*)
			cmd=${words[i]}
			break
			;;
		esac
	done

	case $prev in
	-c | --config)
		_filedir conf
		return
		;;
	-s | --socket)
		_filedir
		return
		;;
	-t | --target | -p | --params | -T | --timeout | --since | -n | --lines)
		return
		;;
	esac

	local opts
	case $cmd in
	"")
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$global" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		fi
		return
		;;
	status | jobs | apps) opts="$global" ;;
	drain) opts="$global --off" ;;
	run) opts="$global -t --target -p --params -T --timeout" ;;
	logs)
		opts="$global -f --follow --since -n --lines"
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -W "$(_nodeagentctl_apps "${words[0]}" "${conn[@]}")" -- "$cur"))
			return
		fi
		;;
	help)
		COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		return
		;;
	*) return ;;
	esac
	[[ $cur == -* ]] && COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -F _nodeagentctl nodeagentctl
