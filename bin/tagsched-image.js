#!/usr/bin/env node
// The tagsched-image command: registers tsx so that Node runs the TypeScript image builder as it is.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/image/main.ts');
