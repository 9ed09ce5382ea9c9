/**
 * An APT source in the deb822 format of sources.list(5), as a recipe's `source` gives it: checked
 * field by field before any work, so that a typo ("Suite:") or a missing field is named with its
 * line instead of surfacing as an apt error halfway through a build.
 */
import { fieldValue, parseDeb822, type Deb822Paragraph } from './deb822.js';
import { hasUserInfo, USERINFO_ADVICE } from '../../core/url-userinfo.js';

/** One stanza of a source, as apt will read it. */
export interface AptSourceStanza {
  readonly types: readonly ('deb' | 'deb-src')[];
  readonly uris: readonly string[];
  readonly suites: readonly string[];
  readonly components: readonly string[];
  /** Key files named by Signed-By (absolute paths), which the image must hold. */
  readonly keyFiles: readonly string[];
  /** Whether Signed-By holds the key itself (an armored block). */
  readonly embeddedKey: boolean;
}

/** A validated source: its stanzas and its text, written as given into the image. */
export interface AptSource {
  readonly text: string;
  readonly stanzas: readonly AptSourceStanza[];
}

/** Fields of sources.list(5) in the deb822 style; `X-` fields are extensions apt ignores. */
const KNOWN_FIELDS = [
  'Types',
  'URIs',
  'Suites',
  'Components',
  'Enabled',
  'Architectures',
  'Architectures-Add',
  'Architectures-Remove',
  'Languages',
  'Languages-Add',
  'Languages-Remove',
  'Targets',
  'Targets-Add',
  'Targets-Remove',
  'PDiffs',
  'By-Hash',
  'Allow-Insecure',
  'Allow-Weak',
  'Allow-Downgrade-To-Insecure',
  'Trusted',
  'Signed-By',
  'Check-Valid-Until',
  'Valid-Until-Min',
  'Valid-Until-Max',
  'Check-Date',
  'Date-Max-Future',
  'InRelease-Path',
  'Snapshot',
] as const;
const KNOWN = new Map(KNOWN_FIELDS.map((f) => [f.toLowerCase(), f]));

/** URI schemes apt has methods for (with the mirror+ and tor+ wrappers). */
const URI_SCHEMES = new Set([
  'http',
  'https',
  'file',
  'copy',
  'cdrom',
  'mirror',
  'mirror+http',
  'mirror+https',
  'mirror+file',
  'tor+http',
  'tor+https',
]);

const ARCH = /^[a-z0-9][a-z0-9-]*$/;
const COMPONENT = /^[A-Za-z0-9][A-Za-z0-9/+._-]*$/;
const SUITE = /^[A-Za-z0-9$(][A-Za-z0-9$()/+._~-]*$/;
const FINGERPRINT = /^[0-9A-Fa-f]{40}!?$|^[0-9A-Fa-f]{64}!?$/;
const YES_NO = new Set(['yes', 'no']);

/** A source that apt would refuse or misread; `problems` lists every one, with its line. */
export class AptSourceError extends Error {
  override readonly name = 'AptSourceError';
  constructor(readonly problems: readonly string[]) {
    super(`the APT source is not valid: ${problems.join('; ')}`);
  }
}

const words = (value: string | undefined): string[] => (value ?? '').split(/\s+/).filter(Boolean);

function stanzaOf(p: Deb822Paragraph, problems: string[]): AptSourceStanza | null {
  const at = (name: string) =>
    `line ${p.fields.find((f) => f.name.toLowerCase() === name.toLowerCase())?.line ?? p.line}`;
  const before = problems.length;
  for (const f of p.fields) {
    const lower = f.name.toLowerCase();
    if (lower.startsWith('x-') || KNOWN.has(lower)) continue;
    problems.push(
      `line ${f.line}: unknown field ${f.name} (sources.list(5) has ${KNOWN_FIELDS.slice(0, 5).join(', ')}, Signed-By, …)`,
    );
  }
  const types = words(fieldValue(p, 'Types'));
  if (types.length === 0) problems.push(`line ${p.line}: the stanza has no Types (deb and/or deb-src)`);
  for (const t of types)
    if (t !== 'deb' && t !== 'deb-src') problems.push(`${at('Types')}: type ${t} is not deb or deb-src`);

  const uris = words(fieldValue(p, 'URIs'));
  if (uris.length === 0) problems.push(`line ${p.line}: the stanza has no URIs`);
  for (const uri of uris) {
    // Said without the URI, which holds the secret.
    if (hasUserInfo(uri)) {
      problems.push(`${at('URIs')}: a URI ${USERINFO_ADVICE}`);
      continue;
    }
    let scheme: string | null = null;
    try {
      scheme = new URL(uri).protocol.slice(0, -1);
    } catch {
      problems.push(`${at('URIs')}: ${uri} is not a URI`);
      continue;
    }
    if (!URI_SCHEMES.has(scheme))
      problems.push(`${at('URIs')}: apt has no method for ${scheme}: (use http, https, file, …)`);
  }

  const suites = words(fieldValue(p, 'Suites'));
  if (suites.length === 0) problems.push(`line ${p.line}: the stanza has no Suites`);
  for (const s of suites) if (!SUITE.test(s)) problems.push(`${at('Suites')}: ${s} is not a suite name`);
  const exactPath = suites.some((s) => s.endsWith('/'));
  const components = words(fieldValue(p, 'Components'));
  if (exactPath && components.length)
    problems.push(`${at('Components')}: a suite that is an exact path (ending in /) takes no Components`);
  if (!exactPath && suites.length && components.length === 0)
    problems.push(`line ${p.line}: the stanza has no Components (such as main)`);
  for (const c of components)
    if (!COMPONENT.test(c)) problems.push(`${at('Components')}: ${c} is not a component name`);

  for (const name of ['Architectures', 'Architectures-Add', 'Architectures-Remove']) {
    for (const a of words(fieldValue(p, name)))
      if (!ARCH.test(a)) problems.push(`${at(name)}: ${a} is not a Debian architecture name`);
  }
  for (const name of [
    'Enabled',
    'PDiffs',
    'By-Hash',
    'Allow-Insecure',
    'Allow-Weak',
    'Allow-Downgrade-To-Insecure',
    'Check-Valid-Until',
    'Check-Date',
  ]) {
    const v = fieldValue(p, name);
    if (v !== undefined && !YES_NO.has(v)) problems.push(`${at(name)}: ${name} must be yes or no, got ${v}`);
  }
  const trusted = fieldValue(p, 'Trusted');
  if (trusted !== undefined)
    problems.push(`${at('Trusted')}: Trusted turns off signature checks; give the key in Signed-By instead`);
  for (const name of ['Allow-Insecure', 'Allow-Weak', 'Allow-Downgrade-To-Insecure']) {
    if (fieldValue(p, name) === 'yes')
      problems.push(`${at(name)}: ${name}: yes accepts unsigned or weakly signed archives; a worker image does not`);
  }

  const signedBy = (fieldValue(p, 'Signed-By') ?? '').trim();
  let embeddedKey = false;
  const keyFiles: string[] = [];
  if (signedBy.startsWith('-----BEGIN PGP PUBLIC KEY BLOCK-----')) {
    embeddedKey = true;
    if (!signedBy.includes('-----END PGP PUBLIC KEY BLOCK-----'))
      problems.push(`${at('Signed-By')}: the key block has no END line`);
  } else {
    for (const item of signedBy.split(/[\s,]+/).filter(Boolean)) {
      if (item.startsWith('/')) keyFiles.push(item);
      else if (!FINGERPRINT.test(item))
        problems.push(
          `${at('Signed-By')}: ${item} is neither an absolute key file path, a fingerprint nor a key block`,
        );
    }
  }
  if (problems.length > before) return null;
  return { types: types as ('deb' | 'deb-src')[], uris, suites, components, keyFiles, embeddedKey };
}

/** Parses and checks a deb822 APT source; throws an AptSourceError naming every problem. */
export function parseAptSource(text: string): AptSource {
  const { paragraphs, problems: syntax } = parseDeb822(text);
  // The one-line format of sources.list is the usual mistake: say so rather than "not a field name".
  const oneLine = new Set<number>();
  text.split('\n').forEach((line, i) => {
    if (/^(deb|deb-src)(\s+\[[^\]]*\])?\s+\S+:\//.test(line)) oneLine.add(i + 1);
  });
  const problems = [
    ...[...oneLine].map(
      (line) =>
        `line ${line}: this is the one-line format of sources.list; write the source as deb822 (Types:, URIs:, Suites:, Components:)`,
    ),
    ...syntax.filter((p) => !oneLine.has(p.line)).map((p) => `line ${p.line}: ${p.message}`),
  ];
  if (paragraphs.length === 0 && problems.length === 0)
    problems.push('the source has no stanza (Types:, URIs:, Suites:, Components:)');
  const stanzas: AptSourceStanza[] = [];
  for (const p of paragraphs) {
    const stanza = stanzaOf(p, problems);
    if (stanza) stanzas.push(stanza);
  }
  if (problems.length) throw new AptSourceError(problems);
  return { text: text.endsWith('\n') ? text : `${text}\n`, stanzas };
}
