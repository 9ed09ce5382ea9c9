/**
 * The deployment files stay in step with the code: the agent's unit in deploy/ is the one images
 * get, systemd accepts both units, the Dockerfile copies only files that exist (and the bundles
 * the build makes), and compose's bootstrap script parses. Docker itself does not run here.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { agentUnit } from '../../src/cli/image/agent-files.js';
import { BUNDLES } from '../../src/cli/build/bundles.js';

const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

describe('deployment files', () => {
  it('deploy/tagsched-worker.service is the unit images get', () => {
    expect(fs.readFileSync('deploy/tagsched-worker.service', 'utf8')).toBe(agentUnit());
  });

  it.runIf(hasSystemdAnalyze && fs.existsSync('/usr/bin/node'))('systemd accepts both units', () => {
    for (const unit of ['deploy/tagsched.service', 'deploy/tagsched-worker.service']) {
      const verify = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
      expect(verify.stderr, unit).toBe('');
      expect(verify.status, unit).toBe(0);
    }
  });

  it('the Dockerfile copies files that exist, and the bundles the build makes', () => {
    const dockerfile = fs.readFileSync('Dockerfile', 'utf8');
    const copies = [...dockerfile.matchAll(/^COPY (?!--from)(.+)$/gm)]
      .map((m) => m[1].split(/\s+/).slice(0, -1))
      .flat();
    expect(copies.length).toBeGreaterThan(4);
    for (const file of copies) expect(fs.existsSync(file), file).toBe(true);
    const fromBuild = [...dockerfile.matchAll(/^COPY --from=build (.+)$/gm)]
      .map((m) => m[1].split(/\s+/).slice(0, -1))
      .flat();
    expect(fromBuild).toEqual(
      expect.arrayContaining([
        `/src/dist/${BUNDLES.agent.outFile}`,
        `/src/dist/${BUNDLES.agent.outFile}.LICENSES`,
        '/src/dist',
      ]),
    );
    // The service runs what tsc writes for src/server.ts (tsconfig.build.json: outDir dist, rootDir .).
    expect(dockerfile).toContain('CMD ["/usr/bin/node", "dist/src/server.js"]');
    expect(fs.readFileSync('deploy/tagsched.service', 'utf8')).toContain(
      'ExecStart=/usr/bin/node /opt/tagsched/dist/src/server.js',
    );
    expect(dockerfile).toMatch(/^USER tagsched$/m);
    expect(dockerfile).toMatch(/^USER tagsched-worker$/m);
  });

  it("compose's bootstrap script is valid JavaScript, and compose runs it for both agents", () => {
    execFileSync(process.execPath, ['--check', 'deploy/compose-bootstrap.mjs']);
    const compose = fs.readFileSync('compose.yaml', 'utf8');
    expect(compose).toContain('entrypoint: [/usr/bin/node, /compose-bootstrap.mjs, agent-1, agent-2]');
    expect(compose).toMatch(/^ {2}agent-1:$/m);
    expect(compose).toMatch(/^ {2}agent-2:$/m);
  });
});
