# Sandbox init. Runs as pid 1 of a fresh pid namespace (see init.ts for the invariants it provides).
# Inputs (environment): SBX_LOWER (overlay lowerdir list for /), SBX_LAYER and SBX_WORK (writable layer
# and overlay work dirs), SBX_MERGED (mount point), SBX_HOSTDIRS (host dirs overlaid read-only, e.g. "usr"),
# SBX_ROOTLESS (1 when sandboxd runs without root; the user namespace is then created here).
set -eu
M="$SBX_MERGED"
mount -t overlay overlay -o "lowerdir=$SBX_LOWER,upperdir=$SBX_LAYER/root,workdir=$SBX_WORK/root" "$M"
for d in $SBX_HOSTDIRS; do
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$SBX_LAYER/$d,workdir=$SBX_WORK/$d" "$M/$d"
done
mount -t tmpfs -o nosuid,mode=755,size=1m tmpfs "$M/dev"
for n in null zero full random urandom tty; do
  : > "$M/dev/$n"
  mount --bind "/dev/$n" "$M/dev/$n"
done
mkdir -m 755 "$M/dev/pts"
mkdir -m 1777 "$M/dev/shm"
mount -t devpts -o newinstance,nosuid,noexec,ptmxmode=0666,mode=0620 devpts "$M/dev/pts"
ln -s pts/ptmx "$M/dev/ptmx"
ln -s /proc/self/fd "$M/dev/fd"
ln -s /proc/self/fd/0 "$M/dev/stdin"
ln -s /proc/self/fd/1 "$M/dev/stdout"
ln -s /proc/self/fd/2 "$M/dev/stderr"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$M/dev/shm"
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs "$M/run"
mount -t proc proc "$M/proc"
ip link set lo up
hostname sandbox 2>/dev/null || echo sandbox > /proc/sys/kernel/hostname
# /proc is still the host's here, so this is the host pid of this shell (pid 1 inside).
read -r hostpid _rest < /proc/self/stat
cd "$M"
pivot_root . .
umount -l /
cd /
# The holder owns the sandbox user namespace; sandboxd writes its id maps (root mode).
# It is created after pivot_root: unshare(CLONE_NEWUSER) is refused while the root is being switched.
if [ "${SBX_ROOTLESS:-0}" = 1 ]; then
  unshare --user --map-user=1000 --map-group=1000 -- sleep infinity &
else
  unshare --user -- sleep infinity &
fi
echo "ready $hostpid"
exec >/dev/null 2>&1 </dev/null
# Reap orphans forever (dash's `wait` reaps any child while it waits for the sleep job). exec drops this
# script's host path from pid 1's command line.
exec /bin/sh -c 'while :; do sleep 86400 & wait; done' sandbox-init
