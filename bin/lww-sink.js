#!/usr/bin/env node
// Loads the TypeScript CLI through tsx's loader so the package runs without a build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
