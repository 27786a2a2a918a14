#!/usr/bin/env bash
# The restore drill: restores a database dump into a fresh database, starts the real server on
# it with the master key, and proves through the public API that old conversations and their
# logs are served and (task verify-secrets) that every secret decrypts with that key.
# Exit 0 when it passed, 1 when a check failed, 2 for bad usage. The checks and their
# environment are described in scripts/restore-drill.ts; the procedure in docs/operations.md.
#
#   MASTER_SECRETS_KEY=... SECRET_KEY_BASE=... DRILL_API_KEY=pdk_... \
#     scripts/restore-drill.sh /backups/paddock-20260101T042300Z.dump
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Node 24 (it runs the TypeScript directly): the checkout's own, else the one on PATH.
node="$root/node_modules/.bin/node"
[ -x "$node" ] || node=$(command -v node || true)
if [ -z "$node" ] || ! "$node" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)'; then
  echo "restore drill: Node.js 24 or later is needed (run npm ci in $root)" >&2
  exit 2
fi
exec "$node" "$root/scripts/restore-drill.ts" "$@"
