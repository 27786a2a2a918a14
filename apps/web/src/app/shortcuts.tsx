// Keyboard shortcuts: one registry, so the help dialog (`?`) lists exactly what is bound.
// A shortcut is a key (`n`, `?`, `g d` as a two-key sequence) with a description; pages
// register theirs while mounted. Keys typed into a field never trigger a shortcut.
import { useEffect, useSyncExternalStore } from 'react';

export interface Shortcut {
  keys: string;
  description: string;
  run: () => void;
}

const bound = new Map<number, Shortcut>();
let nextId = 0;
let version = 0;
const listeners = new Set<() => void>();
const changed = () => {
  version++;
  for (const l of listeners) l();
};

export function registerShortcut(shortcut: Shortcut): () => void {
  const id = nextId++;
  bound.set(id, shortcut);
  changed();
  return () => {
    bound.delete(id);
    changed();
  };
}

/** Binds shortcuts while the calling component is mounted. */
export function useShortcuts(shortcuts: readonly Shortcut[]): void {
  useEffect(() => {
    const off = shortcuts.map(registerShortcut);
    return () => {
      for (const o of off) o();
    };
  }, [shortcuts]);
}

export function useShortcutList(): Shortcut[] {
  useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => version,
  );
  const seen = new Set<string>();
  return [...bound.values()].reverse().filter((s) => !seen.has(s.keys) && seen.add(s.keys));
}

function typingInto(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName);
}

let pending = '';
let pendingTimer: ReturnType<typeof setTimeout> | undefined;

/** Installs the one keydown listener; called once at startup. */
export function installShortcuts(): void {
  window.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typingInto(event.target)) return;
    if (document.querySelector('dialog[open]') && event.key !== 'Escape') return;
    const key = event.key;
    const sequence = pending ? `${pending} ${key}` : key;
    // Latest registration wins, so a page can override a global key.
    const all = [...bound.values()].reverse();
    const hit = all.find((s) => s.keys === sequence);
    if (hit) {
      event.preventDefault();
      pending = '';
      hit.run();
      return;
    }
    if (all.some((s) => s.keys.startsWith(`${sequence} `))) {
      pending = sequence;
      clearTimeout(pendingTimer);
      pendingTimer = setTimeout(() => {
        pending = '';
      }, 1000);
      return;
    }
    pending = '';
  });
}
