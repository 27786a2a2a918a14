# Sandbox init. Runs as pid 1 of a fresh pid namespace (see namespaces.ts for the invariants it provides).
# Inputs (environment): SBX_MERGED (mount point of the sandbox root), SBX_FSTAB_ROOT (fstab: the overlay root,
# the read-only host dir overlays, the /dev tmpfs), SBX_DEV_TEMPLATE (device mount points and /dev symlinks,
# copied into the /dev tmpfs), SBX_FSTAB_DEV (fstab: device bind mounts, devpts, /dev/shm, /run, /proc),
# SBX_ROOTLESS (1 when sandboxd runs without root; the user namespace is then created here), SBX_OWNER (root
# mode: the sandbox's own unprivileged host uid/gid, which creates and so owns the sandbox user namespace).
# The working directory is the sandbox's state directory: the overlay options name their directories
# relative to it, so /proc/self/mountinfo inside shows no host path.
# Every external command costs a fork+exec, so the mounts are done by one mount(8) per phase.
# Output: "net <host pid>" once the network namespace has loopback up (sandboxd opens the proxy listener
# in it meanwhile), then "ready <host pid>" when the root is switched and the user namespace holder forked.
set -eu
M="$SBX_MERGED"
# /proc is still the host's here, so this is the host pid of this shell (pid 1 inside).
read -r hostpid _rest < /proc/self/stat
ip link set lo up
echo "net $hostpid"
mount -a -T "$SBX_FSTAB_ROOT"
cp -a "$SBX_DEV_TEMPLATE/." "$M/dev/"
mount -a -T "$SBX_FSTAB_DEV"
# A write to /proc/sys needs host root; rootless falls back to sethostname(2) in our own uts namespace.
{ echo sandbox > /proc/sys/kernel/hostname; } 2>/dev/null || hostname sandbox
# The FIFOs of exec stdio (exec/procs.ts FifoPool): a tmpfs of this mount namespace only, detached from every
# tree by the switch of roots below and reached only through fd 9 (sandboxd: /proc/<host pid>/fd/9), so the
# paths a sandbox process sees for its stdio hold no host path. No other process of the sandbox keeps fd 9.
mount -t tmpfs -o mode=700,size=4k,nr_inodes=4096 paddock fifos
exec 9<fifos
cd "$M"
pivot_root . .
umount -l /
cd /
# The holder owns the sandbox user namespace; sandboxd writes its id maps (root mode).
# It is created after pivot_root: unshare(CLONE_NEWUSER) is refused while the root is being switched.
# The binaries run from here on are the sandbox root's system ones, which sandbox ids cannot write.
# Root mode: the namespace is created by the sandbox's own unprivileged host uid, so inotify, key and
# process accounting of everything inside is charged to that uid, not to host root.
if [ "${SBX_ROOTLESS:-0}" = 1 ]; then
  unshare --user --map-user=1000 --map-group=1000 -- sleep infinity 9<&- &
else
  setpriv --reuid="$SBX_OWNER" --regid="$SBX_OWNER" --clear-groups -- unshare --user -- sleep infinity 9<&- &
fi
echo "ready $hostpid"
exec >/dev/null 2>&1 </dev/null
# Reap orphans forever (dash's `wait` reaps any child while it waits for the sleep job). exec drops this
# script's host path from pid 1's command line.
exec /bin/sh -c 'while :; do sleep 86400 9<&- & wait; done' sandbox-init
