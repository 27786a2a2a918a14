#!/usr/bin/env node
// Runs the TypeScript entry directly (Node >= 24 strips types).
import '../src/main.ts';
