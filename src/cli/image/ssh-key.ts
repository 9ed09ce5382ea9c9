/**
 * A fresh ed25519 key pair in OpenSSH form, for a short-lived login (an image upload over SSH).
 *
 * ssh2's generateKeyPairSync now and then (about 1 in 700 ed25519 keys here) returns a private key
 * that its own parser, and so its client and server, reject as malformed; such a key is dropped and
 * another generated, so every key this returns is one ssh2 reads back.
 */
import ssh2 from 'ssh2';

const ATTEMPTS = 20;

export function generateSshKeyPair(comment?: string): { private: string; public: string } {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const keys = ssh2.utils.generateKeyPairSync('ed25519', comment === undefined ? undefined : { comment });
    if (!(ssh2.utils.parseKey(keys.private) instanceof Error) && !(ssh2.utils.parseKey(keys.public) instanceof Error))
      return keys;
  }
  throw new Error(`no readable ed25519 key in ${ATTEMPTS} tries`);
}
