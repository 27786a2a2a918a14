// Branch names: git check-ref-format's rules for `refs/heads/<name>` (with --branch's ban on a
// leading "-"), checked before anything runs in the sandbox (which checks again with git itself),
// and the default name of a conversation's branch.

/** Why `name` cannot be a branch, or null when it can (git-check-ref-format(1)). */
export function branchNameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty';
  if (Buffer.byteLength(name) > 255) return 'must be at most 255 bytes';
  if (name.startsWith('-')) return 'must not start with "-"';
  if (name === '@') return 'must not be "@"';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what git refuses
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name))
    return 'must not contain spaces, control characters or ~ ^ : ? * [ \\';
  if (name.includes('..')) return 'must not contain ".."';
  if (name.includes('@{')) return 'must not contain "@{"';
  if (name.startsWith('/') || name.endsWith('/') || name.includes('//'))
    return 'must not start or end with "/" or contain "//"';
  if (name.endsWith('.')) return 'must not end with "."';
  for (const part of name.split('/')) {
    if (part.startsWith('.')) return 'no part between slashes may start with "."';
    if (part.endsWith('.lock')) return 'no part between slashes may end with ".lock"';
  }
  return null;
}

/** `paddock/<last 8 hex digits of the conversation id>-<n>` (UUIDv7: the last digits are random). */
export function defaultBranchName(conversationId: string, n: number): string {
  return `paddock/${conversationId.replace(/-/g, '').slice(-8)}-${n}`;
}

/** The first line of a prompt as a commit subject: trimmed, a Markdown heading's # dropped, at most 72 characters. */
export function commitSubject(prompt: string): string {
  const line =
    prompt
      .split('\n')
      .map((l) =>
        l
          .trim()
          .replace(/^#{1,6}\s+/, '')
          .trim(),
      )
      .find((l) => l !== '') ?? 'Work from a Paddock conversation';
  const chars = [...line];
  return chars.length <= 72 ? line : `${chars.slice(0, 71).join('')}…`;
}
