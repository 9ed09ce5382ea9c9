// ESLint 9 flat config (`npm run lint`): ESLint's and typescript-eslint's recommended rules over the
// code, its tests, the benchmarks and the scripts. Not type-aware: the type-checked presets took over a
// minute of CPU here, and most of what they found repeats what `tsc --strict` checks or is the
// loose JSON of GraphQL answers in the tests.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'data/', 'images/', 'test/artifacts/', '.tagsched-worker/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    rules: {
      // A leading underscore marks what is unused on purpose (an argument a signature requires), and
      // `const { dropped, ...rest } = o` is how the code leaves a field out of a copy.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // The code matches control characters on purpose: to refuse them in client input and names.
      'no-control-regex': 'off',
      // Plugins extend Pothos's types by declaration merging into its global namespace, as Pothos documents.
      '@typescript-eslint/no-namespace': ['error', { allowDeclarations: true }],
    },
  },
  {
    // GraphQL answers read as loose JSON, whose shape the operation's own selection gives: the tests, the
    // benchmarks, and tagsched-admin (which prints what each command selected).
    files: ['test/**', 'bench/**', 'src/cli/admin/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
