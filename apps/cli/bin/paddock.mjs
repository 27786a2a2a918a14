#!/usr/bin/env node
// Runs the TypeScript entry directly (Node >= 24 strips types). V8's compile cache, kept in the
// user's cache directory, makes every command after the first start about twice as fast (the
// modules are not parsed and compiled again); NODE_DISABLE_COMPILE_CACHE=1 turns it off.
import { enableCompileCache } from 'node:module';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

const xdg = process.env.XDG_CACHE_HOME;
try {
  // A directory that cannot be created only leaves the cache off (Node reports, never throws there).
  enableCompileCache(
    join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'paddock', 'compile-cache'),
  );
} catch {}
await import('../src/main.ts');
