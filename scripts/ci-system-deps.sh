#!/usr/bin/env bash
# Debian packages the test suite needs beyond a standard base install. Idempotent; a
# no-op when everything is present. Runs as root (CI) or through sudo when available.
set -euo pipefail
need=()
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v git >/dev/null 2>&1 || need+=(git)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ps >/dev/null 2>&1 || need+=(procps)
# sandboxd disk images (root mode) and the checkpoint race attack test
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v fsfreeze >/dev/null 2>&1 || need+=(util-linux)
command -v losetup >/dev/null 2>&1 || need+=(mount)
command -v perl >/dev/null 2>&1 || need+=(perl-base)
if [ ${#need[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
