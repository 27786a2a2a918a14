#!/usr/bin/env -S node --max-semi-space-size=32
// Runs the TypeScript entry directly (Node >= 24 strips types), with the server's Node flags
// (src/node-flags.ts; a shebang cannot import them, so they are repeated here).
import '../src/main.ts';
