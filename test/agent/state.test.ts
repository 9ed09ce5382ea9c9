import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chooseCredential,
  readState,
  StateFileError,
  writeState,
  type AgentState,
  type CredentialChoice,
} from '../../src/agent/state.js';

const server = 'http://ci:4000/graphql';
const stateFile = '/w/state.json';
const stored: AgentState = { workerToken: 'stored', workerName: 'cloud-1', server };

describe('chooseCredential', () => {
  it.each<
    [
      string,
      { token?: string; activationToken?: string },
      AgentState | null,
      CredentialChoice['kind'],
      Partial<CredentialChoice>,
    ]
  >([
    [
      '--token over everything',
      { token: 't', activationToken: 'a' },
      stored,
      'token',
      { token: 't', source: 'option', workerName: null },
    ],
    [
      'the state file over an activation token',
      { activationToken: 'a' },
      stored,
      'token',
      { token: 'stored', source: 'state-file', workerName: 'cloud-1' },
    ],
    [
      'an activation without a state file',
      { activationToken: 'a' },
      null,
      'activate',
      { activationToken: 'a', replacesStateFor: null },
    ],
    [
      'an activation when the state file is another server’s',
      { activationToken: 'a' },
      { ...stored, server: 'http://old/graphql' },
      'activate',
      { replacesStateFor: 'http://old/graphql' },
    ],
    ['nothing', {}, null, 'none', {}],
    ['nothing but another server’s state file', {}, { ...stored, server: 'http://old/graphql' }, 'none', {}],
  ])('%s', (_name, tokens, state, kind, fields) => {
    const choice = chooseCredential(
      { token: tokens.token ?? null, activationToken: tokens.activationToken ?? null, serverUrl: server, stateFile },
      state,
    );
    expect(choice.kind).toBe(kind);
    expect(choice).toMatchObject(fields);
  });

  it('never offers another server’s token, and says what to do', () => {
    const choice = chooseCredential(
      { token: null, activationToken: null, serverUrl: server, stateFile },
      { ...stored, server: 'http://old/graphql' },
    );
    expect(choice).toEqual({
      kind: 'none',
      reason: expect.stringMatching(
        /state file \/w\/state.json holds a token for http:\/\/old\/graphql, not http:\/\/ci:4000\/graphql: pass --token or --activation-token/,
      ),
    });
  });
});

describe('the state file', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-state-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is missing at first', () => {
    expect(readState(path.join(dir, 'none.json'))).toBeNull();
  });

  it('is written readable by its owner only, creating its directory, and read back', () => {
    const file = path.join(dir, 'sub', 'state.json');
    writeState(file, stored);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(readState(file)).toEqual(stored);
    expect(fs.readdirSync(path.dirname(file))).toEqual(['state.json']);
  });

  it('narrows the permissions of a file that existed', () => {
    const file = path.join(dir, 'wide.json');
    fs.writeFileSync(file, '{}', { mode: 0o644 });
    writeState(file, stored);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  });

  it.each([
    ['not JSON', 'workerToken=abc'],
    ['without a token', JSON.stringify({ workerName: 'x', server })],
    ['with an empty token', JSON.stringify({ ...stored, workerToken: '' })],
  ])('is refused when %s, naming the file', (_name, content) => {
    const file = path.join(dir, 'bad.json');
    fs.writeFileSync(file, content);
    expect(() => readState(file)).toThrow(StateFileError);
    expect(() => readState(file)).toThrow(file);
  });
});
