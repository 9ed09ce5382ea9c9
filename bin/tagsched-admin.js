#!/usr/bin/env node
// The tagsched-admin command: registers tsx so that Node runs the TypeScript CLI as it is.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/admin/main.ts');
