import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { printedSchema } from '../../api/schema.js';

// Writes schema.graphql at the repository root from the Pothos schema.
const target = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../schema.graphql');
fs.writeFileSync(target, printedSchema() + '\n');
console.log(`wrote ${target}`);
