// Light and dark themes: without a choice the stylesheet follows prefers-color-scheme; the
// toggle stores a choice (public/theme-init.js applies it before the first paint).
export type Theme = 'light' | 'dark';
const KEY = 'paddock.theme';

export function currentTheme(): Theme {
  const chosen = document.documentElement.dataset['theme'];
  if (chosen === 'light' || chosen === 'dark') return chosen;
  return window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

export function setTheme(theme: Theme): void {
  document.documentElement.dataset['theme'] = theme;
  try {
    localStorage.setItem(KEY, theme);
  } catch {
    // Storage refused (private mode): the choice lasts for this page only.
  }
}

export function toggleTheme(): Theme {
  const next = currentTheme() === 'dark' ? 'light' : 'dark';
  setTheme(next);
  return next;
}
