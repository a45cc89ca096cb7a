#!/usr/bin/env bash
# Installs what Airlock needs on a Debian/Ubuntu machine and makes sure a
# Docker daemon answers. Idempotent: a second run only checks.
#   scripts/setup.sh            engine + tests
#   scripts/setup.sh desktop    also the GTK/WebKit headers the desktop app builds against,
#                               and what its tests use: Xvfb and Chromium
set -euo pipefail

want_desktop=0
[ "${1:-}" = desktop ] && want_desktop=1

say() { printf 'setup: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null; then
		exec sudo -E "$0" "$@"
	fi
	say "run as root (or install sudo): Airlock mounts overlays and installs Docker"
	exit 77
fi

pkgs=(docker.io iptables iproute2 debootstrap busybox-static git gcc make pkg-config ca-certificates tmux)
# Podman (with catatonit for --init) is the second daemon the tests run
# Airlock against (engine/podman_test.go); the engine never needs it.
pkgs+=(podman catatonit)
[ "$want_desktop" = 1 ] && pkgs+=(libgtk-3-dev libwebkit2gtk-4.0-dev xvfb xauth chromium)
# The interface is built with npm; a node already on the PATH (any 18+) is
# used, else Debian's.
command -v npm >/dev/null || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null || { say "no apt-get: install ${missing[*]} yourself"; exit 69; }
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH=/usr/local/go/bin:$PATH
fi
command -v go >/dev/null || { say "Go is missing: install Go 1.26 or newer (https://go.dev/doc/install), then run this again"; exit 69; }

if ! docker info >/dev/null 2>&1; then
	if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
		say "starting docker with systemctl"
		systemctl start docker || true
	fi
fi
if ! docker info >/dev/null 2>&1; then
	say "starting dockerd (log: /var/log/airlock-dockerd.log)"
	setsid nohup dockerd >/var/log/airlock-dockerd.log 2>&1 </dev/null &
	for _ in $(seq 1 60); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
	docker info >/dev/null 2>&1 || { say "dockerd did not start: see /var/log/airlock-dockerd.log"; exit 69; }
fi
grep -q overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -q overlay /proc/filesystems || { say "this kernel has no overlayfs: Airlock's workspaces need it"; exit 69; }
say "ready: $(docker version --format 'Docker {{.Server.Version}} (API {{.Server.APIVersion}})')"
