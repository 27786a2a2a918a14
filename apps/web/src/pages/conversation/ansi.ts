// A small ANSI SGR parser for the raw log: colours (16, 256 and 24-bit), bold, dim, italic,
// underline, inverse and strike; every other escape sequence (cursor moves, OSC titles,
// charset switches) is dropped so it never shows as garbage. The state carries across
// chunks and lines, as a terminal's would: a colour set on one line stays until reset.

export interface Style {
  fg?: string;
  bg?: string;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
  inverse?: boolean;
  strike?: boolean;
}

export interface Segment {
  text: string;
  style: Style | null;
}

/** The 16 base colours as CSS variables, so each theme picks readable shades. */
const BASE = Array.from({ length: 16 }, (_, i) => `var(--ansi-${i})`);

function color256(n: number): string {
  if (n < 16) return BASE[n]!;
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v},${v},${v})`;
  }
  const i = n - 16;
  const c = (x: number) => (x === 0 ? 0 : 55 + x * 40);
  return `rgb(${c(Math.floor(i / 36))},${c(Math.floor(i / 6) % 6)},${c(i % 6)})`;
}

function applySgr(style: Style, params: number[]): Style {
  const s: Style = { ...style };
  if (params.length === 0) params = [0];
  for (let i = 0; i < params.length; i++) {
    const p = params[i]!;
    if (p === 0) for (const k of Object.keys(s)) delete s[k as keyof Style];
    else if (p === 1) s.bold = true;
    else if (p === 2) s.dim = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.underline = true;
    else if (p === 7) s.inverse = true;
    else if (p === 9) s.strike = true;
    else if (p === 22) {
      delete s.bold;
      delete s.dim;
    } else if (p === 23) delete s.italic;
    else if (p === 24) delete s.underline;
    else if (p === 27) delete s.inverse;
    else if (p === 29) delete s.strike;
    else if (p >= 30 && p <= 37) s.fg = BASE[p - 30]!;
    else if (p === 39) delete s.fg;
    else if (p >= 40 && p <= 47) s.bg = BASE[p - 40]!;
    else if (p === 49) delete s.bg;
    else if (p >= 90 && p <= 97) s.fg = BASE[p - 90 + 8]!;
    else if (p >= 100 && p <= 107) s.bg = BASE[p - 100 + 8]!;
    else if (p === 38 || p === 48) {
      const key = p === 38 ? 'fg' : 'bg';
      if (params[i + 1] === 5 && params[i + 2] !== undefined) {
        s[key] = color256(Math.min(255, params[i + 2]!));
        i += 2;
      } else if (params[i + 1] === 2 && params[i + 4] !== undefined) {
        const [r, g, b] = [params[i + 2]!, params[i + 3]!, params[i + 4]!].map((v) => Math.min(255, v));
        s[key] = `rgb(${r},${g},${b})`;
        i += 4;
      }
    }
  }
  return s;
}

const isEmpty = (s: Style) => Object.keys(s).length === 0;

/**
 * Stateful parser: feed it text (any chunking), take complete lines. A partial escape
 * sequence at the end of a chunk waits for the next chunk.
 */
export class AnsiParser {
  private style: Style = {};
  private pending = '';

  /** Splits `text` into styled segments; newlines stay in the text for the caller to split. */
  parse(text: string): Segment[] {
    const input = this.pending + text;
    this.pending = '';
    const out: Segment[] = [];
    let buf = '';
    const flush = () => {
      if (buf) out.push({ text: buf, style: isEmpty(this.style) ? null : this.style });
      buf = '';
    };
    // Plain text runs are copied as slices: only escapes and control bytes are looked at.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control bytes is the point
    const special = /[\x00-\x08\x0b\x0c\x0e-\x1f]/g;
    let i = 0;
    while (i < input.length) {
      special.lastIndex = i;
      const hit = special.exec(input);
      const stop = hit ? hit.index : input.length;
      if (stop > i) buf += input.slice(i, stop);
      i = stop;
      if (i >= input.length) break;
      if (input.charCodeAt(i) !== 0x1b) {
        // Other C0 controls but tab, newline and carriage return are invisible in a log.
        i++;
        continue;
      }
      const next = input[i + 1];
      if (next === undefined) {
        this.pending = input.slice(i);
        break;
      }
      if (next === '[') {
        // CSI: parameters and intermediates, then one final byte in @..~
        let j = i + 2;
        while (j < input.length && (input.charCodeAt(j) < 0x40 || input.charCodeAt(j) > 0x7e)) j++;
        if (j >= input.length) {
          if (input.length - i < 64) this.pending = input.slice(i);
          break;
        }
        if (input[j] === 'm') {
          flush();
          const body = input.slice(i + 2, j);
          const params = body === '' ? [] : body.split(/[;:]/).map((x) => Number.parseInt(x, 10) || 0);
          this.style = applySgr(this.style, params);
        }
        i = j + 1;
        continue;
      }
      if (next === ']') {
        // OSC: up to BEL or ST (ESC \)
        const bel = input.indexOf('\x07', i + 2);
        const st = input.indexOf('\x1b\\', i + 2);
        const end = bel === -1 ? st : st === -1 ? bel : Math.min(bel, st);
        if (end === -1) {
          if (input.length - i < 512) this.pending = input.slice(i);
          break;
        }
        i = end + (end === st ? 2 : 1);
        continue;
      }
      // Two- or three-byte escapes (charset selection and the like).
      i += next === '(' || next === ')' ? 3 : 2;
    }
    flush();
    return out;
  }
}

/** The CSS declarations of a style (inverse swaps the two colours). */
export function cssOf(style: Style): Record<string, string> {
  const css: Record<string, string> = {};
  const fg = style.inverse ? (style.bg ?? 'var(--term-bg)') : style.fg;
  const bg = style.inverse ? (style.fg ?? 'var(--term-fg)') : style.bg;
  if (fg) css['color'] = fg;
  if (bg) css['backgroundColor'] = bg;
  if (style.bold) css['fontWeight'] = '700';
  if (style.dim) css['opacity'] = '0.7';
  if (style.italic) css['fontStyle'] = 'italic';
  const deco = [style.underline && 'underline', style.strike && 'line-through'].filter(Boolean).join(' ');
  if (deco) css['textDecoration'] = deco;
  return css;
}
