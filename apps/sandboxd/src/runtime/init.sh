# Sandbox init. Runs as pid 1 of a fresh pid namespace (see namespaces.ts for the invariants it provides).
# Inputs (environment): SBX_MERGED (mount point of the sandbox root), SBX_FSTAB_ROOT (fstab: the overlay root
# and the FIFO tmpfs), SBX_FSTAB_SYS (fstab: the host dir overlays, the /dev tmpfs, /run, /proc, the runtime
# layer), SBX_FSTAB_ROOT_PLAIN / SBX_FSTAB_SYS_PLAIN (the same without idmapped lower layers, the fallback),
# SBX_MOUNT_POINTS (where SBX_FSTAB_SYS mounts, relative to the sandbox root), SBX_IDMAP_TAB (root mode:
# NUL-separated source/target/kind triples of the idmapped lower layers, empty when there are none),
# SBX_IDMAP_PL (the perl program that makes them), SBX_DEV_TEMPLATE (device mount points and /dev symlinks,
# copied into the /dev tmpfs), SBX_FSTAB_DEV (fstab: device bind mounts, devpts, /dev/shm), SBX_ROOTLESS (1
# when sandboxd runs without root; the user namespaces are then created here), SBX_OWNER / SBX_ID_RANGE (root
# mode: the first of the sandbox's own unprivileged host ids, its root, and how many it has; SBX_OWNER
# creates and so owns the sandbox user namespace).
# The working directory is the sandbox's state directory: the overlay options name their directories
# relative to it, so /proc/self/mountinfo inside shows no host path.
# Every external command costs a fork+exec, so the mounts are done by one mount(8) per phase.
#
# The sandbox root is the sandbox's own tree (its writable layer holds whatever its root left there), while
# / is still the host's: a mount point reached through a link it planted (/opt -> /some/host/dir, /run -> ..)
# would make host root mount on, or create, a host directory. So every mount point of the second phase, and
# each directory above it, must be a directory of that tree, never a link (checked with builtins, no fork);
# a missing one is made with mkdir, which never follows a last component that is a link. Nothing of the
# sandbox runs meanwhile (its processes died with the previous init; execs and file writes wait for this
# start), so what the checks see is what mount(8) resolves. The third phase mounts inside the fresh /dev tmpfs.
# Output: "net <host pid>" once the network namespace has loopback up (sandboxd opens the proxy listener
# in it meanwhile), "idmap off" when the idmapped layers could not be made (system directories stay
# read-only), then "ready <host pid>" when the root is switched.
#
# Invariant: every external program this script runs is the host's and runs before the switch of roots.
# After it, pid 1 (host root) only runs shell builtins: the sandbox's root can write its own copy of the
# system directories, so nothing of the sandbox's filesystem may ever run with pid 1's privileges.
set -eu
M="$SBX_MERGED"
# /proc is still the host's here, so this is the host pid of this shell (pid 1 inside).
read -r hostpid _rest < /proc/self/stat
ip link set lo up
echo "net $hostpid"
# The holders of the sandbox user namespaces, made now, with the host's programs (see the invariant). They
# start in / (the host root, which the switch below turns into the sandbox root for them too), never in this
# state directory, and with an empty environment (theirs is readable by the sandbox root); their stderr is
# ours, so an unshare that fails says why. Root mode: created by the sandbox's own unprivileged host uid, so
# inotify, key and process accounting of everything inside is charged to that uid, not to host root.
# Each is awaited (await_holder) until it sleeps in its own user namespace, before the switch of roots: one
# still on its way would look its programs up in the sandbox's root after the switch, and run them with the
# init's identity; and an unshare(2) made between pivot_root and the umount below fails (EPERM: the caller
# then looks chrooted), which failed rootless sandbox starts on a loaded host.
# Builtins only; returns once host pid $1 runs sleep, exits when it ended before.
await_holder() {
  while read -r _pid comm state _rest < "/proc/$1/stat"; do
    [ "$comm" != "(sleep)" ] || return 0
    [ "$state" != Z ] || break
  done
  echo "user namespace holder did not start" >&2
  exit 1
}
if [ "${SBX_ROOTLESS:-0}" = 1 ]; then
  (cd / && exec env -i PATH="$PATH" unshare --user --map-user=1000 --map-group=1000 -- sleep infinity) </dev/null >/dev/null &
  holder=$!
  # The namespace of root execs: its root is the service user, like the outer namespace's, without its
  # capabilities over the sandbox's mount, pid and network namespaces.
  (cd / && exec env -i PATH="$PATH" unshare --user --map-root-user -- sleep infinity) </dev/null >/dev/null &
  # Their host pids (the only children now), awaited below. Each writes its own id map before it execs sleep.
  # (the file has no final newline: read reports EOF)
  read -r h1 h2 _rest < "/proc/$hostpid/task/$hostpid/children" || [ -n "${h2:-}" ]
  holders="$h1 $h2"
else
  (cd / && exec env -i PATH="$PATH" setpriv --reuid="$SBX_OWNER" --regid="$SBX_OWNER" --clear-groups -- unshare --user -- sleep infinity) </dev/null >/dev/null &
  holder=$!
  # Its host pid (the only child now), once it runs in its own user namespace (it has exec'd sleep).
  read -r holder_host _rest < "/proc/$hostpid/task/$hostpid/children" || [ -n "${holder_host:-}" ]
  await_holder "$holder_host"
  holders=
  # The sandbox's whole id range (its root first, its user at 1000, the system users packages use between).
  printf '0 %s %s\n' "$SBX_OWNER" "$SBX_ID_RANGE" > "/proc/$holder_host/uid_map"
  printf '0 %s %s\n' "$SBX_OWNER" "$SBX_ID_RANGE" > "/proc/$holder_host/gid_map"
fi
# Root mode: the lower layers, idmapped (IDMAP_PL: the host's through a namespace that maps host root alone),
# show host root's files as the sandbox root's, so the sandbox root can change its own copy of them (apt,
# npm -g as root); other host users' files stay unmapped.
fstab="$SBX_FSTAB_ROOT" sys="$SBX_FSTAB_SYS"
if [ -s "${SBX_IDMAP_TAB:-}" ]; then
  if ! err=$(perl -e "$SBX_IDMAP_PL" "/proc/$holder_host/ns/user" "$SBX_OWNER" "$SBX_IDMAP_TAB" 2>&1); then
    echo "idmap off: $err" | tr '\n' ' '
    echo
    fstab="$SBX_FSTAB_ROOT_PLAIN" sys="$SBX_FSTAB_SYS_PLAIN"
  fi
fi
mount -a -T "$fstab"
# Builtins only, but for the mkdir of a missing directory; $1: a mount point relative to the sandbox root.
# The errors name the path inside the sandbox only (they reach the tenant).
mount_point() {
  rest="$1/" p=
  while [ -n "$rest" ]; do
    p="$p${p:+/}${rest%%/*}" rest="${rest#*/}"
    if [ -L "$M/$p" ]; then
      refuse "/$p in the sandbox is a symbolic link"
    elif [ ! -e "$M/$p" ]; then
      (cd "$M" && exec mkdir -m 755 -- "$p") 2>/dev/null || refuse "/$p in the sandbox is missing and cannot be made"
    elif [ ! -d "$M/$p" ]; then
      refuse "/$p in the sandbox is not a directory"
    fi
  done
}
refuse() {
  echo "$1; a mount point and the directories above it must be directories" >&2
  exit 1
}
for d in $SBX_MOUNT_POINTS; do mount_point "$d"; done
mount -a -T "$sys"
cp -a "$SBX_DEV_TEMPLATE/." "$M/dev/"
mount -a -T "$SBX_FSTAB_DEV"
# A write to /proc/sys needs host root; rootless falls back to sethostname(2) in our own uts namespace.
{ echo sandbox > /proc/sys/kernel/hostname; } 2>/dev/null || hostname sandbox
# The FIFOs of exec stdio (exec/procs.ts FifoPool): a tmpfs of this mount namespace only (SBX_FSTAB_ROOT),
# detached from every tree by the switch of roots below and reached only through fd 9 (sandboxd:
# /proc/<host pid>/fd/9), so the paths a sandbox process sees for its stdio hold no host path. No other
# process of the sandbox has fd 9.
exec 9<fifos
# Rootless: the holders ran meanwhile; now each must be past its last host program.
for h in $holders; do await_holder "$h"; done
cd "$M"
# pivot_root stacks the old root over the new one at /, so umount is still the host's.
pivot_root . .
umount -l /
cd /
echo "ready $hostpid"
exec >/dev/null 2>&1 </dev/null
# Reap orphans while the holder lives (dash's `wait` reaps any child while it waits for the job); builtins
# only. When the holder is gone, the sandbox stops (its processes are killed with pid 1) and the next exec
# starts it again.
set +e
while kill -0 "$holder" 2>/dev/null; do wait "$holder"; done
