// A small, safe Markdown renderer for the agent's text: paragraphs, headings, lists, block
// quotes, fenced and inline code, emphasis and links. It builds React elements only — there
// is no path from the agent's text to raw HTML (no dangerouslySetInnerHTML; `<script>` is
// shown as text) — and a link is kept only when its target is http(s) or mailto
// (markdown.test in conversation.browser.test.ts checks both as attacks).
import type { ReactNode } from 'react';

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

/** Inline spans: `code`, **bold**, *italic* / _italic_, [text](url). */
export function inline(text: string, keyPrefix = ''): ReactNode[] {
  const out: ReactNode[] = [];
  const re =
    /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  let m: RegExpExecArray | null;
  let n = 0;
  // biome-ignore lint/suspicious/noAssignInExpressions: the usual exec loop
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const key = `${keyPrefix}i${n++}`;
    if (m[2] !== undefined) out.push(<code key={key}>{m[2]}</code>);
    else if (m[3] !== undefined || m[4] !== undefined)
      out.push(<strong key={key}>{inline((m[3] ?? m[4])!, key)}</strong>);
    else if (m[5] !== undefined || m[6] !== undefined)
      out.push(<em key={key}>{inline((m[5] ?? m[6])!, key)}</em>);
    else if (m[7] !== undefined && m[8] !== undefined) {
      out.push(
        SAFE_URL.test(m[8]) ? (
          <a key={key} href={m[8]} target="_blank" rel="noopener noreferrer nofollow">
            {inline(m[7], key)}
          </a>
        ) : (
          m[0]
        ),
      );
    }
    last = re.lastIndex;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function Markdown({ text }: { text: string }) {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  const blocks: ReactNode[] = [];
  let i = 0;
  let k = 0;
  const key = () => `b${k++}`;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(fence[1]!)) body.push(lines[i++]!);
      i++;
      blocks.push(
        <pre key={key()} className="md-code" data-lang={fence[2] || undefined}>
          <code>{body.join('\n')}</code>
        </pre>,
      );
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      // Agent headings sit inside the page's own: start at h3.
      const level = Math.min(6, heading[1]!.length + 2);
      const Tag = `h${level}` as 'h3';
      blocks.push(<Tag key={key()}>{inline(heading[2]!)}</Tag>);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      blocks.push(<hr key={key()} />);
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) body.push(lines[i++]!.replace(/^\s*>\s?/, ''));
      blocks.push(
        <blockquote key={key()}>
          <Markdown text={body.join('\n')} />
        </blockquote>,
      );
      continue;
    }
    const bullet = /^\s*([-*+]|\d+[.)])\s+/;
    if (bullet.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items: string[] = [];
      while (i < lines.length && (bullet.test(lines[i]!) || (/^\s{2,}\S/.test(lines[i]!) && items.length))) {
        if (bullet.test(lines[i]!)) items.push(lines[i]!.replace(bullet, ''));
        else items[items.length - 1] += `\n${lines[i]!.trim()}`;
        i++;
      }
      const List = ordered ? 'ol' : 'ul';
      blocks.push(
        <List key={key()}>
          {items.map((item, j) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: list items of a finished text never reorder
            <li key={j}>{inline(item)}</li>
          ))}
        </List>,
      );
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    const para: string[] = [];
    while (
      i < lines.length &&
      lines[i]!.trim() !== '' &&
      !/^\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s)/.test(lines[i]!)
    )
      para.push(lines[i++]!);
    // A line that only looks like a block opener (```js and more) is text: always advance.
    if (para.length === 0) para.push(lines[i++]!);
    blocks.push(<p key={key()}>{inline(para.join('\n'))}</p>);
  }
  return <div className="md">{blocks}</div>;
}
