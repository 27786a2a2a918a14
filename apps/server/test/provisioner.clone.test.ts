// The `clone` stage and source skills against a real sandboxd and a fake git host (smart HTTP
// over TLS, real `git upload-pack`) that the sandbox reaches through its egress proxy.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ExecStreamOptions, SandboxClient } from '@paddock/sandbox-client';
import { createTestNet, type TestNet } from '../../sandboxd/test/netns.ts';
import { ProvisionError } from '../src/conversations/contracts.ts';
import { type FakeGitHost, startFakeGitHost } from './helpers/git-server.ts';
import {
  createEnvironment,
  createVault,
  newConversation,
  type ProvisionHarness,
  provisionerFor,
  sh,
  stagesOf,
  startProvisionHarness,
} from './helpers/provisioning.ts';

let tnet: TestNet;
let h: ProvisionHarness;
let githost: FakeGitHost;
let base: string;
const TOKEN = 'ghp_fakeToken0123456789abcdefXYZ';
// The sandbox cannot hold the test's CA before the provisioner creates it; TLS is still used
// (https only), only the fake host's certificate is not verified.
const gitEnv = { GIT_SSL_NO_VERIFY: 'true' };

before(async () => {
  tnet = await createTestNet();
  h = await startProvisionHarness({
    sandboxd: {
      net: tnet,
      hosts: { 'git.test': tnet.ip },
      env: { SANDBOXD_EGRESS_ALLOW_CIDRS: tnet.allowEnv },
    },
  });
  const { server, port } = await tnet.listen();
  githost = startFakeGitHost(server);
  base = `https://git.test:${port}`;
});
after(async () => {
  githost?.close();
  await h?.close();
  tnet?.close();
});

/** Records every exec's argv (what the sandbox's process list would show). */
function recording(client: SandboxClient, argvs: string[][]): SandboxClient {
  return {
    ...client,
    execStream: (name: string, options: ExecStreamOptions) => {
      argvs.push(options.cmd);
      return client.execStream(name, options);
    },
  };
}

describe('clone stage', () => {
  test('clones public and private repos at branch, tag and SHA; the token never in argv, the process list or .git', async () => {
    const pub = githost.addRepo('acme/public-app', [
      { files: { 'README.md': 'v1\n' }, tag: 'v1' },
      { files: { 'README.md': 'v2\n' } },
    ]);
    githost.addRepo('acme/private-lib', [{ files: { 'lib.txt': 'secret sauce\n' } }], { token: TOKEN });
    const environmentId = await createEnvironment(h, {
      repos: [
        { url: `${base}/acme/public-app.git` },
        { url: `${base}/acme/public-app`, ref: 'v1' },
        { url: `${base}/acme/public-app.git`, ref: pub.shas[0] },
        { url: `${base}/acme/private-lib.git`, ref: 'main', token_secret: 'LIB_TOKEN' },
      ],
    });
    const vaultId = await createVault(h, { LIB_TOKEN: TOKEN });
    const c = await newConversation(h, { environmentId, vaultId });
    const argvs: string[][] = [];
    const cmdlines: string[] = [];
    githost.onUploadPack(async () => {
      // Mid-clone: what any process in the sandbox can see of every other's command line.
      cmdlines.push(await sh(h.client, c.input.sandboxName, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"));
    });
    const p = provisionerFor(h, { sandbox: recording(h.client, argvs), gitEnv });
    await p.provision(c.input);
    githost.onUploadPack(null);
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'clone:started',
      'clone:done',
    ]);
    const name = c.input.sandboxName;
    assert.equal(await sh(h.client, name, 'cat public-app/README.md'), 'v2\n');
    assert.equal(await sh(h.client, name, 'cat public-app-2/README.md'), 'v1\n');
    assert.equal(await sh(h.client, name, 'cat public-app-3/README.md'), 'v1\n');
    assert.equal(await sh(h.client, name, 'cat private-lib/lib.txt'), 'secret sauce\n');
    // The token reached the host (it is what let the private clone through) …
    assert.ok(githost.seen.some((s) => s.path.startsWith('/acme/private-lib') && s.authorization));
    // … but never an argv, a command line in the sandbox, or anything under .git.
    assert.ok(cmdlines.length >= 4, `saw ${cmdlines.length} upload-packs`);
    const b64 = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');
    for (const text of [...argvs.map((a) => a.join(' ')), ...cmdlines]) {
      assert.ok(!text.includes(TOKEN) && !text.includes(b64), text);
    }
    assert.equal(
      await sh(h.client, name, `grep -rlF -e '${TOKEN}' -e '${b64}' -e extraheader -i */.git || true`),
      '',
    );
    assert.doesNotMatch(
      await sh(h.client, name, 'git -C private-lib config --list'),
      /extraheader|x-access-token/i,
    );
    await h.client.destroy(name);
  });

  test('a wrong token fails the clone stage with a readable reason (no prompt, no hang), redacted', async () => {
    githost.addRepo('acme/locked', [{ files: { 'a.txt': 'a' } }], { token: TOKEN });
    const environmentId = await createEnvironment(h, {
      repos: [{ url: `${base}/acme/locked`, token_secret: 'LOCKED_TOKEN' }],
      secrets: { LOCKED_TOKEN: 'wrong-token-value-123456' },
    });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(provisionerFor(h, { gitEnv }).provision(c.input), (err: unknown) => {
      assert.ok(err instanceof ProvisionError);
      assert.equal(err.stage, 'clone');
      assert.match(err.message, /cloning https:\/\/git\.test:\d+\/acme\/locked failed \(exit \d+\)/);
      return true;
    });
    assert.match(c.writer.text(), /Authentication failed|could not read Username|terminal prompts disabled/);
    assert.ok(!c.writer.text().includes('wrong-token-value-123456'));
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });

  test('a token_secret that is set nowhere fails the clone stage naming the key only', async () => {
    const environmentId = await createEnvironment(h, {
      repos: [{ url: `${base}/acme/locked`, token_secret: 'NOPE' }],
    });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(provisionerFor(h, { gitEnv }).provision(c.input), /token secret NOPE/);
  });

  test('source skills are cloned at their ref into the adapter skills dir', async () => {
    githost.addRepo('acme/review-skill', [
      { files: { 'SKILL.md': '# Review v1\n' }, tag: 'v1.0.0' },
      { files: { 'SKILL.md': '# Review v2\n' } },
    ]);
    const c = await newConversation(h, {
      skills: [
        { source: 'acme/review-skill', ref: 'v1.0.0' },
        { name: 'inline-one', content: 'inline' },
      ],
    });
    await provisionerFor(h, { gitEnv, skillSourceBaseUrl: base }).provision(c.input);
    const name = c.input.sandboxName;
    assert.equal(await sh(h.client, name, 'cat .test-runtime/skills/review-skill/SKILL.md'), '# Review v1\n');
    assert.equal(await sh(h.client, name, 'cat .test-runtime/skills/inline-one/SKILL.md'), 'inline');
    await h.client.destroy(name);
  });
});
