#!/usr/bin/env bash
# Debian packages the test suite needs beyond a standard base install. Idempotent; a
# no-op when everything is present. Runs as root (CI) or through sudo when available.
set -euo pipefail
need=()
# An ordinary user's PATH has no sbin directories, where ip, mkfs.ext4, fsfreeze and losetup live.
have() {
  command -v "$1" >/dev/null 2>&1 && return 0
  local d
  for d in /usr/sbin /sbin /usr/bin /bin; do [ -x "$d/$1" ] && return 0; done
  return 1
}
have unshare || need+=(util-linux)
have nsenter || need+=(util-linux)
have ip || need+=(iproute2)
have git || need+=(git)
have curl || need+=(curl)
have ps || need+=(procps)
# sandboxd disk images (root mode) and the checkpoint race attack test
have mkfs.ext4 || need+=(e2fsprogs)
have fsfreeze || need+=(util-linux)
have losetup || need+=(mount)
have perl || need+=(perl-base)
# the sandboxes' runtime layer copies rg (opencode and claude search with it; apps/sandboxd/runtime-layer.json)
have rg || need+=(ripgrep)
# the console's browser tests and screenshots (playwright-core drives Debian's chromium)
have chromium || need+=(chromium)
# fonts so screenshots and layout measure real glyphs on a minimal machine
[ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)
# the deploy tests (apps/server/test/deploy.kube-play.test.ts, deploy.compose.test.ts): podman with runc (crun refuses hybrid
# cgroups), mmdebstrap for the self-made base image, podman-compose for deploy/compose.yaml
have podman || need+=(podman)
have runc || need+=(runc)
have mmdebstrap || need+=(mmdebstrap)
have podman-compose || need+=(podman-compose)
# compose's services find each other by name: DNS on podman networks (Debian 12's podman uses CNI,
# whose dnsname plugin provides it; netavark setups have aardvark-dns instead)
[ -x /usr/lib/cni/dnsname ] || [ -x /usr/libexec/podman/aardvark-dns ] || need+=(golang-github-containernetworking-plugin-dnsname)
have newuidmap || need+=(uidmap)
have slirp4netns || need+=(slirp4netns)
# kube play builds its pause image from catatonit
have catatonit || need+=(catatonit)
# promtool checks deploy/prometheus/alerts.yml, and a real Prometheus scrapes a real server in
# apps/server/test/metrics.prometheus.test.ts (Debian's postinst only starts a service under systemd)
have promtool || need+=(prometheus)
have prometheus || need+=(prometheus)
if [ ${#need[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
