import { describe, expect, it } from 'vitest';
import { AptSourceError, parseAptSource } from '../../src/cli/image/apt-source.js';
import { parseDeb822 } from '../../src/cli/image/deb822.js';
import { parseRecipe, RecipeError } from '../../src/cli/image/recipe.js';

const DEBIAN = `Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`;

/** The problems of a recipe that must be refused. */
function problemsOf(input: unknown): { field: string; message: string }[] {
  try {
    parseRecipe(input, 'amd64');
  } catch (err) {
    if (err instanceof RecipeError) return [...err.problems];
    throw err;
  }
  throw new Error(`accepted: ${JSON.stringify(input)}`);
}

describe('recipes', () => {
  it('fills in the defaults: trixie, the host architecture, deb.debian.org, unshare, autopkgtest and sbuild', () => {
    expect(parseRecipe({}, 'arm64')).toEqual({
      suite: 'trixie',
      architecture: 'arm64',
      mirror: null,
      source: null,
      enable_backends: ['unshare'],
      enable_tasks: ['autopkgtest', 'sbuild'],
    });
  });

  it('keeps what is given, the source as written (with a final newline)', () => {
    const r = parseRecipe(
      {
        suite: 'sid',
        architecture: 'riscv64',
        mirror: 'http://127.0.0.1:3142/debian',
        source: DEBIAN.trimEnd(),
        enable_backends: ['qemu', 'unshare'],
        enable_tasks: [],
      },
      'amd64',
    );
    expect(r).toEqual({
      suite: 'sid',
      architecture: 'riscv64',
      mirror: 'http://127.0.0.1:3142/debian',
      source: DEBIAN,
      enable_backends: ['qemu', 'unshare'],
      enable_tasks: [],
    });
    expect(Object.isFrozen(r)).toBe(true);
  });

  it.each<[string, unknown, { field: string; message: RegExp }[]]>([
    [
      'an unknown backend',
      { enable_backends: ['unshare', 'docker'] },
      [{ field: 'enable_backends', message: /unknown backend "docker" \(known: unshare, incus-lxc, incus-vm, qemu\)/ }],
    ],
    ['an unknown task', { enable_tasks: ['lintian'] }, [{ field: 'enable_tasks', message: /unknown task "lintian"/ }]],
    [
      'a task listed twice',
      { enable_tasks: ['sbuild', 'sbuild'] },
      [{ field: 'enable_tasks', message: /listed twice/ }],
    ],
    ['backends that are not a list', { enable_backends: 'unshare' }, [{ field: 'enable_backends', message: /array/ }]],
    ['a suite with capitals', { suite: 'Trixie' }, [{ field: 'suite', message: /Debian suite or codename/ }]],
    ['a suite with a space', { suite: 'trixie main' }, [{ field: 'suite', message: /Debian suite or codename/ }]],
    [
      'a suite whose nodejs is too old',
      { suite: 'bookworm' },
      [{ field: 'suite', message: /bookworm ships nodejs 18; the agent needs nodejs 20.19/ }],
    ],
    ['oldstable', { suite: 'oldstable' }, [{ field: 'suite', message: /nodejs 18/ }]],
    [
      'an architecture with capitals',
      { architecture: 'AMD64' },
      [{ field: 'architecture', message: /Debian architecture name/ }],
    ],
    [
      'an architecture with a slash',
      { architecture: 'linux/amd64' },
      [{ field: 'architecture', message: /Debian architecture name/ }],
    ],
    [
      'a mirror that is not a URL',
      { mirror: 'deb.debian.org' },
      [{ field: 'mirror', message: /http:\/\/, https:\/\/ or file:\/\/ URL/ }],
    ],
    [
      'an ftp mirror',
      { mirror: 'ftp://ftp.debian.org/debian' },
      [{ field: 'mirror', message: /http:\/\/, https:\/\/ or file:\/\/ URL/ }],
    ],
    [
      'a mirror with a user and password',
      { mirror: 'https://user:secret@host/debian' },
      [{ field: 'mirror', message: /user name or password.*auth\.conf.*--apt-auth FILE/ }],
    ],
    [
      'a mirror with a token for a user',
      { mirror: 'https://secret@host/debian' },
      [{ field: 'mirror', message: /user name or password/ }],
    ],
    [
      'a mirror with a password and no slashes, which URL parsers accept',
      { mirror: 'https:user:secret@host/debian' },
      [{ field: 'mirror', message: /user name or password/ }],
    ],
    [
      'a source URI with a user and password',
      {
        source:
          'Types: deb\nURIs: http://deb.debian.org/debian https://user:secret@apt.example.org/debian\nSuites: trixie\nComponents: main\n',
      },
      [{ field: 'source', message: /^line 2: a URI holds a user name or password.*--apt-auth FILE/ }],
    ],
    [
      'an unknown key',
      { suite: 'trixie', enable_task: ['sbuild'] },
      [
        {
          field: 'enable_task',
          message:
            /not a recipe key \(keys: suite, architecture, mirror, source, enable_backends, enable_tasks, ssh_authorized_keys\)/,
        },
      ],
    ],
    ['an empty source', { source: '' }, [{ field: 'source', message: /deb822 APT source/ }]],
    [
      'a one-line-style source',
      { source: 'deb http://deb.debian.org/debian trixie main' },
      [{ field: 'source', message: /line 1: this is the one-line format of sources.list; write the source as deb822/ }],
    ],
    [
      'a source with no Components',
      { source: 'Types: deb\nURIs: http://x.example/debian\nSuites: trixie\n' },
      [{ field: 'source', message: /no Components/ }],
    ],
  ])('refuses %s, naming the field', (_, input, expected) => {
    const problems = problemsOf(input);
    expect(problems).toHaveLength(expected.length);
    expected.forEach((e, i) => {
      expect(problems[i].field).toBe(e.field);
      expect(problems[i].message).toMatch(e.message);
    });
  });

  it('never repeats the credentials of a URL it refuses', () => {
    const problems = problemsOf({
      mirror: 'https://user:secret@host/debian',
      source: 'Types: deb\nURIs: https://user:secret@host/apt\nSuites: trixie\nComponents: main\n',
    });
    expect(problems.map((p) => p.field)).toEqual(['mirror', 'source']);
    expect(JSON.stringify(problems)).not.toContain('secret');
  });

  it('keeps a mirror whose path or query holds an @', () => {
    expect(parseRecipe({ mirror: 'https://host/~user@example/debian' }, 'amd64').mirror).toBe(
      'https://host/~user@example/debian',
    );
  });

  it('names every problem at once', () => {
    const problems = problemsOf({
      suite: 'bookworm',
      architecture: 'X',
      enable_backends: ['kvm'],
      enable_tasks: ['x'],
      mirror: 'nope',
      source: 'Types: rpm\n',
    });
    expect(problems.map((p) => p.field)).toEqual([
      'suite',
      'architecture',
      'mirror',
      'enable_backends',
      'enable_tasks',
      'source',
      'source',
      'source',
    ]);
  });

  it.each([[null], [[]], ['trixie'], [42]])('refuses %j as a recipe', (input) => {
    expect(problemsOf(input)).toEqual([{ field: '(recipe)', message: expect.stringMatching(/JSON object/) }]);
  });

  it('says what is wrong in its message', () => {
    expect(() => parseRecipe({ enable_tasks: ['lintian'] }, 'amd64')).toThrow(
      /the recipe is not valid:\n {2}enable_tasks: unknown task "lintian"/,
    );
  });
});

describe('deb822', () => {
  it('reads paragraphs, continuation lines, " ." as an empty line, and skips comments', () => {
    const { paragraphs, problems } = parseDeb822(
      '# a comment\nPackage: a\nDescription: short\n long\n .\n more\n\n\nPackage: b\nStatus: install ok installed\n',
    );
    expect(problems).toEqual([]);
    expect(paragraphs.map((p) => p.fields.map((f) => [f.name, f.value, f.line]))).toEqual([
      [
        ['Package', 'a', 2],
        ['Description', 'short\nlong\n\nmore', 3],
      ],
      [
        ['Package', 'b', 9],
        ['Status', 'install ok installed', 10],
      ],
    ]);
  });

  it.each([
    ['a continuation line first', ' Package: a\n', /continuation line/],
    ['a line with no colon', 'Package a\n', /expected "Field: value"/],
    ['a field name with a space', 'Pack age: a\n', /not a field name/],
    ['a field name starting with -', '-Package: a\n', /not a field name/],
    ['a field twice', 'Package: a\npackage: b\n', /appears twice/],
    ['a NUL character', 'Package: a\0\n', /NUL/],
  ])('reports %s with its line', (_, text, message) => {
    const { problems } = parseDeb822(text);
    expect(problems[0].message).toMatch(message);
    expect(problems[0].line).toBeGreaterThan(0);
  });
});

describe('APT sources (deb822)', () => {
  it('reads the stanzas of a valid source', () => {
    const key = '-----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGN\n -----END PGP PUBLIC KEY BLOCK-----';
    const source = parseAptSource(
      `${DEBIAN}\nTypes: deb deb-src\nURIs: https://example.org/apt\nSuites: stable/\nSigned-By:\n ${key}\nX-Repolib-Name: example\nEnabled: yes\n`,
    );
    expect(source.stanzas).toEqual([
      {
        types: ['deb'],
        uris: ['http://deb.debian.org/debian'],
        suites: ['trixie', 'trixie-updates'],
        components: ['main', 'contrib'],
        keyFiles: ['/usr/share/keyrings/debian-archive-keyring.gpg'],
        embeddedKey: false,
      },
      {
        types: ['deb', 'deb-src'],
        uris: ['https://example.org/apt'],
        suites: ['stable/'],
        components: [],
        keyFiles: [],
        embeddedKey: true,
      },
    ]);
  });

  it('accepts a key fingerprint in Signed-By', () => {
    expect(
      parseAptSource(`${DEBIAN.replace(/Signed-By: .*/, 'Signed-By: 0123456789ABCDEF0123456789ABCDEF01234567')}`)
        .stanzas[0].keyFiles,
    ).toEqual([]);
  });

  it.each([
    ['no stanza', '# only a comment\n', /no stanza/],
    ['no Types', DEBIAN.replace('Types: deb\n', ''), /no Types/],
    ['an unknown type', DEBIAN.replace('Types: deb', 'Types: rpm'), /type rpm is not deb or deb-src/],
    ['no URIs', DEBIAN.replace(/URIs: .*\n/, ''), /no URIs/],
    ['a URI that is not one', DEBIAN.replace(/URIs: .*/, 'URIs: deb.debian.org/debian'), /not a URI/],
    [
      'a URI apt has no method for',
      DEBIAN.replace(/URIs: .*/, 'URIs: ftp://ftp.debian.org/debian'),
      /no method for ftp/,
    ],
    ['no Suites', DEBIAN.replace(/Suites: .*\n/, ''), /no Suites/],
    ['a misspelt field', DEBIAN.replace('Suites:', 'Suite:'), /unknown field Suite/],
    ['Components with an exact path', DEBIAN.replace(/Suites: .*/, 'Suites: ./'), /exact path .* takes no Components/],
    ['a bad architecture', `${DEBIAN}Architectures: amd64 ARM\n`, /ARM is not a Debian architecture/],
    ['Enabled not yes or no', `${DEBIAN}Enabled: true\n`, /Enabled must be yes or no/],
    ['Trusted', `${DEBIAN}Trusted: yes\n`, /Trusted turns off signature checks/],
    ['Allow-Insecure', `${DEBIAN}Allow-Insecure: yes\n`, /accepts unsigned/],
    [
      'a relative key path',
      DEBIAN.replace(/Signed-By: .*/, 'Signed-By: keyrings/x.gpg'),
      /neither an absolute key file path/,
    ],
    [
      'a key block with no end',
      DEBIAN.replace(/Signed-By: .*/, 'Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n abc'),
      /no END line/,
    ],
    ['a duplicated field', `${DEBIAN}Types: deb-src\n`, /appears twice/],
  ])('refuses %s', (_, text, message) => {
    let error: unknown;
    try {
      parseAptSource(text);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(AptSourceError);
    expect((error as AptSourceError).problems.join('\n')).toMatch(message);
  });

  it('names the line of each problem', () => {
    expect(() => parseAptSource(`${DEBIAN}\nTypes: deb\nURIs: gopher://x\nSuites: sid\nComponents: main\n`)).toThrow(
      /line 8: apt has no method for gopher/,
    );
  });
});
