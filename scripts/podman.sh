#!/usr/bin/env bash
# Runs Podman's Docker-compatible service for Airlock's tests, or for trying
# Airlock against Podman by hand, without touching the host's Docker:
#
#   scripts/podman.sh install     install Debian's podman (and catatonit, the
#                                 init `--init` needs) if missing
#   scripts/podman.sh run DIR     run `podman system service` in the
#                                 foreground, everything under DIR; its socket
#                                 is DIR/podman.sock (DOCKER_HOST=unix://DIR/podman.sock)
#
# The service gets its own network namespace (it never sees docker0 or the
# host's firewall) and its own mount namespace, a slave of the host's, so
# that workspaces the engine mounts under a shared mount on the host (the
# test makes its state directory one) reach the containers. Its storage
# (--root, --runroot) and configuration are DIR's, not /var/lib/containers.
set -euo pipefail

say() { printf 'podman.sh: %s\n' "$*" >&2; }

install() {
	[ "$(id -u)" -eq 0 ] || { say "run as root: podman's service runs rootful for Airlock"; exit 77; }
	missing=()
	for p in podman catatonit; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ "${#missing[@]}" -eq 0 ] && return
	command -v apt-get >/dev/null || { say "no apt-get: install ${missing[*]} yourself"; exit 69; }
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

run() {
	dir=$1
	mkdir -p "$dir"
	# Podman gives rootful containers nofile and nproc limits of 1048576
	# and 4194304, which only a process with CAP_SYS_RESOURCE may set
	# above its own: where root lacks it (some sandboxes), containers fail
	# to start with "error setting rlimits". Give them the limits the
	# service has instead (podman lowers its own nproc to 32768).
	nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
	[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
	cat >"$dir/containers.conf" <<-EOF
		[containers]
		default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
		[engine]
		cgroup_manager = "cgroupfs"
		events_logger = "file"
	EOF
	export CONTAINERS_CONF=$dir/containers.conf
	exec unshare --mount --propagation slave --net -- bash -c 'ip link set lo up && exec "$@"' podman \
		podman --root "$dir/root" --runroot "$dir/run" --tmpdir "$dir/tmp" system service --time=0 "unix://$dir/podman.sock"
}

case "${1:-}" in
install) install ;;
run)
	[ -n "${2:-}" ] || { say "usage: $0 run DIR"; exit 64; }
	run "$2"
	;;
*)
	say "unknown command ${1:-(none)}: use install or run DIR"
	exit 64
	;;
esac
