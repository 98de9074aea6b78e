#!/usr/bin/env node
// The installed CLI: compiled JavaScript from dist/ (`npm run build`; `npm run lww-sink` runs the sources).
await import('../dist/cli/main.js');
