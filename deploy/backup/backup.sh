#!/bin/sh
# Paddock's database backup job: dumps the database (pg_dump custom format) every
# BACKUP_INTERVAL_SECONDS into BACKUP_DIR and prunes dumps older than BACKUP_RETENTION_DAYS.
# Written for the official postgres:17 image (its pg_dump); POSIX sh, no other dependency.
#
#   DATABASE_URL             postgres://user:password@host:port/db?sslmode=...   (required)
#   BACKUP_DIR               where dumps go (default /backups)
#   BACKUP_INTERVAL_SECONDS  seconds between dumps (default 86400, one a day)
#   BACKUP_RETENTION_DAYS    dumps older than this many days are deleted (default 14; 0 keeps
#                            the newest dump only)
#
#   backup.sh          dump now, then every interval until SIGTERM/SIGINT
#   backup.sh --once   dump once, prune, exit (0 on success)
#
# A blank variable means its default; a malformed one exits non-zero naming it. Each dump is
# written to a hidden temporary name and renamed into place (`paddock-YYYYmmddTHHMMSSZ.dump`,
# UTC) only once pg_dump succeeded, so a listed dump is always complete. Pruning happens only
# after a successful dump and never removes the dump just written. One log line per dump; the
# DATABASE_URL password is never logged nor put on pg_dump's command line (it goes in
# PGPASSWORD). The database alone is not a complete backup: MASTER_SECRETS_KEY is the other
# half, kept apart from the dumps (docs/operations.md, "Backups").
set -eu

log() { printf '%s backup: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
die() {
  log "$*" >&2
  exit 2
}

once=0
for arg in "$@"; do
  case "$arg" in
    --once) once=1 ;;
    -h | --help)
      sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument \"$arg\" (usage: backup.sh [--once])" ;;
  esac
done

# A whole number (decimal, at most 9 digits) of at least MIN, or DEFAULT when blank; surrounding
# blanks are ignored, as the server does.
number() { # VALUE MIN DEFAULT
  v=$(printf '%s' "$1" | tr -d ' \t')
  if [ -z "$v" ]; then
    printf '%s' "$3"
    return 0
  fi
  case "$v" in
    *[!0-9]*) return 1 ;;
  esac
  v=$(printf '%s' "$v" | sed 's/^0*//')
  v=${v:-0}
  [ "${#v}" -le 9 ] && [ "$v" -ge "$2" ] || return 1
  printf '%s' "$v"
}

BACKUP_DIR=${BACKUP_DIR:-/backups}
interval=$(number "${BACKUP_INTERVAL_SECONDS:-}" 1 86400) ||
  die "BACKUP_INTERVAL_SECONDS: must be a whole number of seconds, at least 1 (got \"${BACKUP_INTERVAL_SECONDS}\")"
retention=$(number "${BACKUP_RETENTION_DAYS:-}" 0 14) ||
  die "BACKUP_RETENTION_DAYS: must be a whole number of days, 0 or more (got \"${BACKUP_RETENTION_DAYS}\")"

url=${DATABASE_URL:-}
[ -n "$url" ] || die "DATABASE_URL: required (postgres://user:password@host:port/database)"
case "$url" in
  postgres://?* | postgresql://?*) ;;
  *) die "DATABASE_URL: must be a postgres:// or postgresql:// URL" ;;
esac

# Split the password out of the URL: scheme://[user[:password]@]host[:port][/db][?params].
scheme=${url%%://*}
rest=${url#*://}
authority=${rest%%/*}
path=${rest#"$authority"}
password=""
safe_url=$url
case "$authority" in
  *@*)
    userinfo=${authority%@*}
    hostpart=${authority##*@}
    case "$userinfo" in
      *:*)
        password=${userinfo#*:}
        userinfo=${userinfo%%:*}
        ;;
    esac
    url="$scheme://$userinfo@$hostpart$path"
    safe_url=$url
    ;;
esac
case "$safe_url" in
  *\?*) safe_url=${safe_url%%\?*} ;; # parameters stay out of the log too
esac

# Percent-decoding of the password (URL userinfo is percent-encoded), byte by byte.
urldecode() {
  s=$1
  out=""
  while [ -n "$s" ]; do
    case "$s" in
      %[0-9A-Fa-f][0-9A-Fa-f]*)
        hex=${s#%}
        hex=${hex%"${hex#??}"}
        # shellcheck disable=SC2059 # the format is the octal escape just built
        out="$out$(printf "\\$(printf '%03o' "0x$hex")")"
        s=${s#%??}
        ;;
      *)
        c=${s%"${s#?}"}
        out="$out$c"
        s=${s#?}
        ;;
    esac
  done
  printf '%s' "$out"
}
if [ -n "$password" ]; then
  PGPASSWORD=$(urldecode "$password")
  export PGPASSWORD
fi
unset password

command -v pg_dump >/dev/null 2>&1 || die "pg_dump not found on PATH (run this in the postgres:17 image)"
mkdir -p "$BACKUP_DIR" 2>/dev/null || die "BACKUP_DIR: cannot create $BACKUP_DIR"
[ -d "$BACKUP_DIR" ] && [ -w "$BACKUP_DIR" ] || die "BACKUP_DIR: $BACKUP_DIR is not a writable directory"
umask 077 # dumps hold every tenant's data: readable by their owner only

tmp=""
cleanup() { [ -z "$tmp" ] || rm -f "$tmp"; }
trap cleanup EXIT

# One dump and prune. Returns non-zero (after logging why) when the dump failed.
backup() {
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  name="paddock-$stamp.dump"
  tmp="$BACKUP_DIR/.$name.partial"
  started=$(date +%s)
  if ! pg_dump --format=custom --file="$tmp" --dbname="$url" 2>"$tmp.err"; then
    reason=$(tail -n 1 "$tmp.err" 2>/dev/null || true)
    rm -f "$tmp" "$tmp.err"
    tmp=""
    log "FAILED dump of $safe_url: ${reason:-pg_dump failed}" >&2
    return 1
  fi
  rm -f "$tmp.err"
  mv -f "$tmp" "$BACKUP_DIR/$name"
  tmp=""
  bytes=$(wc -c <"$BACKUP_DIR/$name" | tr -d ' ')
  seconds=$(($(date +%s) - started))
  # Older than the retention: modified more than retention*1440 minutes ago. Partial files left
  # by a killed run go after a day. Never the dump just written.
  # BACKUP_RETENTION_DAYS=0 keeps the newest dump only.
  if [ "$retention" -eq 0 ]; then
    age=""
  else
    age="-mmin +$((retention * 1440))"
  fi
  # shellcheck disable=SC2086 # $age is zero or two words
  pruned=$(find "$BACKUP_DIR" -maxdepth 1 -type f -name 'paddock-*.dump' ! -name "$name" $age \
    -print -exec rm -f {} + | wc -l | tr -d ' ')
  find "$BACKUP_DIR" -maxdepth 1 -type f -name '.paddock-*.dump.partial*' -mmin +1440 -exec rm -f {} + 2>/dev/null || true
  log "wrote $BACKUP_DIR/$name ($bytes bytes in ${seconds}s) from $safe_url; pruned $pruned dump(s) older than $retention day(s)"
}

if [ "$once" = 1 ]; then
  backup
  exit $?
fi

stop() {
  log "stopping"
  [ -z "${sleeper:-}" ] || kill "$sleeper" 2>/dev/null || true
  exit 0
}
trap stop TERM INT
log "every ${interval}s into $BACKUP_DIR, keeping $retention day(s)"
while :; do
  backup || true # logged; the next interval tries again
  sleep "$interval" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=""
done
