// The one script that computes a sandbox's changes, run as one exec (`sh -c SCRIPT paddock-changes
// MODE LIMIT N rel₁ base₁ … relₙ baseₙ ARGS…`), and the parser of what it prints.
//
// Invariants (changes.test.ts, test/work.changes.test.ts):
// - Every path, directory and commit is a positional argument of a fixed script: nothing is
//   interpolated into shell text, and git reads pathspecs literally (--literal-pathspecs).
// - The user's repository is never written: the working tree is snapshot into a temporary copy
//   of its index (GIT_INDEX_FILE) with `git add -A`, the blobs and trees written into Paddock's
//   own object directory under /home/sandbox/.paddock/changes (GIT_OBJECT_DIRECTORY, the
//   repository's objects as its alternate). No ref, index, config or object of the repository
//   changes, committed or not.
// - Repositories: the cloned ones (given, with their base commit) and every other git
//   repository found under /home/sandbox at depth ≤ 3 outside hidden directories (so never
//   /home/sandbox/.paddock) and node_modules, not inside another found one; such a repository
//   is compared with its root commit, or the empty tree while it has none.
// - The sandbox key (PADDOCK_TOKEN of the env file) is printed first (`/K`), so that a request's
//   redactor hides it like the owner's does; it travels on the backend connection only.
// - Output is NUL-separated (`-z`): every record starts with a marker beginning with "/", which
//   no git path can start with; patches are NUL-free (`tr -d '\000'`) and bounded (`head -c`).
import type { ChangedFile, ChangeStatus } from './changes.tables.ts';

export const HOME = '/home/sandbox';
/** A file's unified diff is inlined up to this size; larger ones are listed with stats only. */
export const MAX_FILE_PATCH_BYTES = 256 * 1024;
/** The patch bytes of one turn's record (all files); files past it are listed with stats only. */
export const MAX_TURN_PATCH_BYTES = 4 * 1024 * 1024;
/** The files listed per repository (the rest is counted in `truncated`). */
export const MAX_FILES_PER_REPOSITORY = 5000;

export const CHANGES_SCRIPT = String.raw`set -u
mode=$1; limit=$2; n=$3; shift 3
H=%{PADDOCK_CHANGES_HOME:-/home/sandbox}; W=$H/.paddock/changes
TAB=$(printf '\t')
mkdir -p "$W/objects" || exit 3
EMPTY=$(git hash-object -t tree /dev/null) || exit 4
repos=$W/repos.$$; starts=$W/starts.$$; idx=$W/index.$$
trap 'rm -f "$repos" "$starts" "$idx"' EXIT
key=$(sed -n "s/^export PADDOCK_TOKEN='\\([^']*\\)'\$/\\1/p" "$H/.paddock/env" 2>/dev/null)
printf '/K\0%s\0' "$key"
: > "$repos"; : > "$starts"
i=0
while [ "$i" -lt "$n" ]; do printf '%s\tcloned\t%s\n' "$1" "$2" >> "$repos"; shift 2; i=$((i+1)); done
want=""; fpath=""; fold=""
case $mode in
  file) want=$1; fpath=$2; fold=$3; shift 3 ;;
  turn) m=$1; shift; i=0
        while [ "$i" -lt "$m" ]; do printf '%s\t%s\n' "$1" "$2" >> "$starts"; shift 2; i=$((i+1)); done ;;
esac
find "$H" -maxdepth 3 \( -path "$H/.*" -o -name node_modules \) -prune -o -name .git -print 2>/dev/null | sort |
while IFS= read -r g; do
  d=%{g%/.git}; rel=%{d#"$H"/}
  [ "$d" = "$H" ] && continue
  skip=0
  while IFS="$TAB" read -r r _k _b; do
    case "$rel" in "$r"|"$r"/*) skip=1; break ;; esac
  done < "$repos"
  [ "$skip" = 1 ] || printf '%s\tcreated\t\n' "$rel" >> "$repos"
done
while IFS="$TAB" read -r rel kind base; do
  [ "$mode" = file ] && [ "$rel" != "$want" ] && continue
  d=$H/$rel
  gd=$(git -C "$d" rev-parse --absolute-git-dir 2>/dev/null) || { printf '/G\0%s\0%s\0' "$rel" "$kind"; continue; }
  head=$(git -C "$d" rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null) || head=""
  if [ "$kind" = created ]; then
    base=""
    [ -n "$head" ] && base=$(git -C "$d" rev-list --max-parents=0 HEAD 2>/dev/null | tail -n 1)
    [ -n "$base" ] || base=$EMPTY
  fi
  export GIT_OBJECT_DIRECTORY="$W/objects" GIT_ALTERNATE_OBJECT_DIRECTORIES="$gd/objects"
  rm -f "$idx"
  [ -f "$gd/index" ] && cp "$gd/index" "$idx"
  GIT_INDEX_FILE=$idx git -C "$d" add -A -- . >/dev/null 2>&1
  tree=$(GIT_INDEX_FILE=$idx git -C "$d" write-tree 2>/dev/null) || { printf '/G\0%s\0%s\0' "$rel" "$kind"; continue; }
  from=$base
  if [ "$mode" = turn ]; then
    [ "$kind" = created ] && from=$EMPTY
    while IFS="$TAB" read -r r t; do [ "$r" = "$rel" ] && from=$t; done < "$starts"
  fi
  printf '/R\0%s\0%s\0%s\0%s\0%s\0' "$rel" "$kind" "$base" "$head" "$tree"
  case $mode in
    list)
      git --literal-pathspecs -C "$d" diff-tree -r -z -M --raw --numstat "$from" "$tree" 2>/dev/null
      printf '/U\0'
      [ -n "$head" ] && git --literal-pathspecs -C "$d" diff-tree -r -z --name-only --no-renames "$head" "$tree" 2>/dev/null ;;
    file)
      if [ -n "$fold" ]; then set -- "$fpath" "$fold"; else set -- "$fpath"; fi
      git --literal-pathspecs -C "$d" diff-tree -r -z -M --raw --numstat "$from" "$tree" -- "$@" 2>/dev/null
      printf '/U\0'
      [ -n "$head" ] && git --literal-pathspecs -C "$d" diff-tree -r -z --name-only --no-renames "$head" "$tree" -- "$@" 2>/dev/null
      printf '/P\0'
      git --literal-pathspecs -C "$d" diff-tree -r -p -M "$from" "$tree" -- "$@" 2>/dev/null | tr -d '\000' | head -c "$limit"
      printf '\0' ;;
    turn)
      git --literal-pathspecs -C "$d" diff-tree -r -z -M --raw --numstat "$from" "$tree" 2>/dev/null
      printf '/U\0'
      [ -n "$head" ] && git --literal-pathspecs -C "$d" diff-tree -r -z --name-only --no-renames "$head" "$tree" 2>/dev/null
      printf '/P\0'
      git --literal-pathspecs -C "$d" diff-tree -r -p -M "$from" "$tree" 2>/dev/null | tr -d '\000' | head -c "$limit"
      printf '\0' ;;
  esac
  printf '/E\0'
done < "$repos"
`.replaceAll('%{', '${'); // written %{ above: ${ would be a template substitution

/** The cloned repositories: directory relative to the home, and the commit the clone was made at. */
export interface ClonedBase {
  dir: string;
  base: string;
}

export type ScriptMode =
  | { mode: 'list' }
  | { mode: 'snap' }
  | { mode: 'file'; dir: string; path: string; oldPath: string | null }
  | { mode: 'turn'; starts: Record<string, string> };

/** The argv of one exec of the script. */
export function scriptArgv(cloned: ClonedBase[], mode: ScriptMode): string[] {
  const limit =
    mode.mode === 'file' ? MAX_FILE_PATCH_BYTES + 1 : mode.mode === 'turn' ? MAX_TURN_PATCH_BYTES + 1 : 0;
  const argv = [
    'sh',
    '-c',
    CHANGES_SCRIPT,
    'paddock-changes',
    mode.mode,
    String(limit),
    String(cloned.length),
  ];
  for (const c of cloned) argv.push(c.dir, c.base);
  if (mode.mode === 'file') argv.push(mode.dir, mode.path, mode.oldPath ?? '');
  if (mode.mode === 'turn') {
    const entries = Object.entries(mode.starts);
    argv.push(String(entries.length));
    for (const [dir, tree] of entries) argv.push(dir, tree);
  }
  return argv;
}

/** One repository as the script printed it (paths and patches still unredacted). */
export interface ScriptRepository {
  dir: string;
  origin: 'cloned' | 'created';
  /** False: the directory is gone or is no longer a readable repository. */
  present: boolean;
  base: string;
  head: string | null;
  tree: string;
  files: ChangedFile[];
  /** The whole patch of the repository's files (mode file and turn), split per file. */
  patches: Buffer[] | null;
  /** The patch output reached the script's limit. */
  patchTruncated: boolean;
}

const STATUS: Record<string, ChangeStatus> = {
  A: 'added',
  M: 'modified',
  D: 'deleted',
  R: 'renamed',
  C: 'added',
  T: 'type_changed',
};

/** Splits `buf` at NUL bytes; the piece after the last NUL (an incomplete field) is dropped. */
function fields(buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (;;) {
    const nul = buf.indexOf(0, start);
    if (nul < 0) break;
    out.push(buf.subarray(start, nul));
    start = nul + 1;
  }
  return out;
}

/** Parses the script's stdout. `limit`: the patch limit it ran with (to tell a cut patch). */
export function parseScriptOutput(
  stdout: Buffer,
  limit = 0,
): { repositories: ScriptRepository[]; sandboxKey: string | null } {
  const tokens = fields(stdout);
  const repos: ScriptRepository[] = [];
  let sandboxKey: string | null = null;
  let i = 0;
  const next = () => tokens[i++]?.toString('utf8') ?? '';
  while (i < tokens.length) {
    const marker = next();
    if (marker === '/K') {
      sandboxKey = next() || null;
      continue;
    }
    if (marker === '/G') {
      const dir = next();
      const origin = next() === 'created' ? 'created' : 'cloned';
      repos.push({
        dir,
        origin,
        present: false,
        base: '',
        head: null,
        tree: '',
        files: [],
        patches: null,
        patchTruncated: false,
      });
      continue;
    }
    if (marker !== '/R') continue; // resynchronise on the next record
    const dir = next();
    const origin = next() === 'created' ? 'created' : 'cloned';
    const base = next();
    const headText = next();
    const tree = next();
    const repo: ScriptRepository = {
      dir,
      origin,
      present: true,
      base,
      head: headText === '' ? null : headText,
      tree,
      files: [],
      patches: null,
      patchTruncated: false,
    };
    // Raw records then numstat records, in the same order.
    const raw: { status: ChangeStatus; path: string; oldPath: string | null }[] = [];
    const stats: { additions: number | null; deletions: number | null }[] = [];
    const uncommitted = new Set<string>();
    let section: 'diff' | 'uncommitted' = 'diff';
    while (i < tokens.length) {
      const token = tokens[i]?.toString('utf8') ?? '';
      if (token === '/E' || token === '/P' || token === '/R' || token === '/G') break;
      i++;
      if (token === '/U') {
        section = 'uncommitted';
        continue;
      }
      if (section === 'uncommitted') {
        uncommitted.add(token);
        continue;
      }
      if (token.startsWith(':')) {
        const letter = token.split(' ').at(-1)?.charAt(0) ?? 'M';
        const status = STATUS[letter] ?? 'modified';
        if (letter === 'R' || letter === 'C') {
          const oldPath = next();
          const path = next();
          raw.push({ status, path, oldPath: letter === 'R' ? oldPath : null });
        } else raw.push({ status, path: next(), oldPath: null });
        continue;
      }
      // numstat: "added\tdeleted\tpath", or "added\tdeleted\t" then old and new path fields.
      const [a = '-', d = '-', p = ''] = token.split('\t');
      if (p === '') {
        i += 2;
      }
      stats.push({ additions: a === '-' ? null : Number(a), deletions: d === '-' ? null : Number(d) });
    }
    raw.forEach((r, n) => {
      const s = stats[n] ?? { additions: null, deletions: null };
      const binary = s.additions === null;
      repo.files.push({
        path: r.path,
        old_path: r.oldPath,
        status: r.status,
        additions: s.additions ?? 0,
        deletions: s.deletions ?? 0,
        binary,
        committed:
          repo.head !== null &&
          !(uncommitted.has(r.path) || (r.oldPath !== null && uncommitted.has(r.oldPath))),
      });
    });
    if (tokens[i]?.toString('utf8') === '/P') {
      i++;
      const patch = tokens[i++] ?? Buffer.alloc(0);
      repo.patchTruncated = limit > 0 && patch.length >= limit;
      repo.patches = splitPatch(patch);
    }
    if (tokens[i]?.toString('utf8') === '/E') i++;
    repos.push(repo);
  }
  return { repositories: repos, sandboxKey };
}

/** Splits a multi-file patch at its `diff --git ` headers (a content line never starts with one). */
export function splitPatch(patch: Buffer): Buffer[] {
  const header = Buffer.from('diff --git ');
  const starts: number[] = [];
  if (patch.subarray(0, header.length).equals(header)) starts.push(0);
  let from = 0;
  for (;;) {
    const at = patch.indexOf('\ndiff --git ', from);
    if (at < 0) break;
    starts.push(at + 1);
    from = at + 1;
  }
  return starts.map((s, n) => patch.subarray(s, starts[n + 1] ?? patch.length));
}
