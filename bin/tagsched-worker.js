#!/usr/bin/env node
// The tagsched-worker command: registers tsx so that Node runs the TypeScript agent as it is.
import { register } from 'tsx/esm/api';

register();
await import('../src/agent/main.ts');
