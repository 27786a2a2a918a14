// Applies the theme chosen with the console's toggle before the first paint; without a
// choice the stylesheet follows prefers-color-scheme.
try {
  const theme = localStorage.getItem('paddock.theme');
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
} catch {
  // Storage refused (private mode): the stylesheet's default applies.
}
