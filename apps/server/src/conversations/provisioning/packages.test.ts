// The commands of the `packages` stage: what an environment's `packages` map becomes, and what it never can.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../http/errors.ts';
import { PACKAGES_TIMEOUT_MS, packageCommands } from './packages.ts';

function refusal(packages: Record<string, string>): AppError {
  try {
    packageCommands(packages);
  } catch (err) {
    assert.ok(err instanceof AppError, `an AppError, not ${String(err)}`);
    return err;
  }
  assert.fail(`${JSON.stringify(packages)} was accepted`);
}

describe('packageCommands', () => {
  it('turns {apt: "jq", npm: "cowsay", pip: "six"} into apt update + install as root, then npm, then pip', () => {
    const commands = packageCommands({ pip: 'six', npm: 'cowsay', apt: 'jq' });
    assert.deepEqual(
      commands.map((c) => [c.manager, c.user, c.argv]),
      [
        ['apt', 'root', ['apt-get', '-q', 'update']],
        ['apt', 'root', ['apt-get', '-q', 'install', '-y', '--no-install-recommends', 'jq']],
        [
          'npm',
          'sandbox',
          ['npm', 'install', '--global', '--no-fund', '--no-audit', '--no-update-notifier', 'cowsay'],
        ],
        [
          'pip',
          'sandbox',
          ['python3', '-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', 'six'],
        ],
      ],
    );
    assert.deepEqual(commands[0]!.env, { DEBIAN_FRONTEND: 'noninteractive' });
    assert.deepEqual(commands[1]!.env, { DEBIAN_FRONTEND: 'noninteractive' });
    assert.deepEqual(commands[3]!.env, { PIP_BREAK_SYSTEM_PACKAGES: '1' });
    for (const c of commands) assert.equal(c.timeoutMs, 300_000);
    assert.equal(PACKAGES_TIMEOUT_MS, 300_000);
  });

  it('passes several specs with versions as separate argv entries, apt-get update once', () => {
    const commands = packageCommands({
      apt: '  jq=1.6-2.1+deb12u1   libonig5:amd64 hello/bookworm ',
      npm: '@anthropic-ai/claude-code@1.0.0 typescript@^5.4 left-pad@latest',
      pip: 'six==1.16.0 requests>=2,<3 Django~=4.2',
    });
    assert.equal(commands.filter((c) => c.argv[2] === 'update').length, 1);
    assert.deepEqual(commands[1]!.argv.slice(5), ['jq=1.6-2.1+deb12u1', 'libonig5:amd64', 'hello/bookworm']);
    assert.deepEqual(commands[2]!.argv.slice(6), [
      '@anthropic-ai/claude-code@1.0.0',
      'typescript@^5.4',
      'left-pad@latest',
    ]);
    assert.deepEqual(commands[3]!.argv.slice(6), ['six==1.16.0', 'requests>=2,<3', 'Django~=4.2']);
  });

  it('returns no command for an empty map or blank values', () => {
    assert.deepEqual(packageCommands({}), []);
    assert.deepEqual(packageCommands({ apt: '  ', npm: '' }), []);
  });

  it('runs only the managers present', () => {
    assert.deepEqual(
      packageCommands({ pip: 'six' }).map((c) => c.manager),
      ['pip'],
    );
  });

  describe('refuses injection attempts with a message naming the manager and the spec', () => {
    const attacks: [string, string][] = [
      ['apt', 'jq; rm -rf /'],
      ['apt', 'jq;rm'],
      ['apt', '-o'],
      ['apt', '-oAPT::Update::Pre-Invoke::=touch${IFS}/pwned'],
      ['apt', '--allow-unauthenticated'],
      ['apt', 'jq$(id)'],
      ['apt', 'jq`id`'],
      ['apt', 'jq|id'],
      ['apt', 'jq&&id'],
      ['apt', '../../etc/passwd'],
      ['apt', '/tmp/evil.deb'],
      ['apt', 'JQ'],
      ['npm', '--prefix=/usr'],
      ['npm', '-g'],
      ['npm', 'cowsay;id'],
      ['npm', 'file:/etc'],
      ['npm', 'git+https://example.com/x.git'],
      ['npm', 'https://example.com/x.tgz'],
      ['npm', '../x'],
      ['pip', '--index-url=http://evil.test/simple'],
      ['pip', '-r/etc/passwd'],
      ['pip', '-e.'],
      ['pip', 'six;id'],
      ['pip', 'six @ https://evil.test/six.whl'],
      ['pip', 'https://evil.test/six.whl'],
      ['pip', './six'],
    ];
    for (const [manager, value] of attacks) {
      it(`${manager}: ${value}`, () => {
        const err = refusal({ [manager]: value });
        assert.equal(err.code, 'validation_failed');
        assert.match(err.message, new RegExp(`^packages\\.${manager}: invalid package spec `));
      });
    }

    it('refuses a spec whose first token is valid and a later one is not, building no command', () => {
      const err = refusal({ apt: 'jq', npm: 'cowsay --ignore-scripts=false' });
      assert.match(err.message, /packages\.npm: invalid package spec "--ignore-scripts=false"/);
    });

    it('refuses a NUL or an invisible character inside a spec', () => {
      assert.equal(refusal({ apt: 'jq\u0000evil' }).code, 'validation_failed');
      assert.match(refusal({ pip: 'six\u200bx' }).message, /packages\.pip/);
    });

    it('refuses an over-long spec', () => {
      assert.equal(refusal({ npm: `a${'b'.repeat(300)}` }).code, 'validation_failed');
    });
  });

  it('refuses an unknown manager', () => {
    const err = refusal({ apt: 'jq', brew: 'jq' });
    assert.equal(err.code, 'validation_failed');
    assert.match(err.message, /unsupported package manager "brew"; supported: apt, npm, pip/);
  });
});
