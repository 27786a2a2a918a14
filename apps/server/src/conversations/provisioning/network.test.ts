// The network stage's policy (spec: Sandbox interface rule 6) and the inference provider host
// a `limited` environment allows for the agent's runtime (issue 10, item 4).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { networkPolicyFor, providerHostsFor } from './network.ts';

const limited = (allowed_hosts: string[]) => ({
  networking_type: 'limited' as const,
  networking_config: { allowed_hosts },
});

describe('networkPolicyFor', () => {
  it('sends nothing for unrestricted, provider hosts or not', () => {
    assert.equal(
      networkPolicyFor(
        { networking_type: 'unrestricted', networking_config: { allowed_hosts: ['a.example.com'] } },
        ['api.anthropic.com'],
      ),
      null,
    );
  });

  it('keeps spec rule 6 exact without provider hosts: allow rules only; no hosts → one * deny', () => {
    assert.deepEqual(networkPolicyFor(limited(['api.github.com', '*.npmjs.org'])), {
      rules: [
        { domain: 'api.github.com', action: 'allow' },
        { domain: '*.npmjs.org', action: 'allow' },
      ],
    });
    assert.deepEqual(networkPolicyFor(limited([]), []), { rules: [{ domain: '*', action: 'deny' }] });
  });

  it('adds the provider hosts as allow rules, once, after the environment list', () => {
    assert.deepEqual(
      networkPolicyFor(limited(['api.github.com', 'api.anthropic.com']), ['api.anthropic.com']),
      {
        rules: [
          { domain: 'api.github.com', action: 'allow' },
          { domain: 'api.anthropic.com', action: 'allow' },
        ],
      },
    );
    assert.deepEqual(networkPolicyFor(limited([]), ['api.openai.com']), {
      rules: [{ domain: 'api.openai.com', action: 'allow' }],
    });
  });
});

describe('providerHostsFor', () => {
  it("allows the default API host of the runtime's provider", () => {
    assert.deepEqual(providerHostsFor({ runtime: 'claude', model: 'anthropic/claude-sonnet-4-5' }, {}), [
      'api.anthropic.com',
    ]);
    assert.deepEqual(providerHostsFor({ runtime: 'codex', model: 'openai/gpt-5' }, {}), ['api.openai.com']);
    assert.deepEqual(providerHostsFor({ runtime: 'gemini', model: 'google/gemini-2.5-pro' }, {}), [
      'generativelanguage.googleapis.com',
    ]);
  });

  it('takes the provider of an opencode agent from its model; none for another provider', () => {
    assert.deepEqual(providerHostsFor({ runtime: 'opencode', model: 'anthropic/claude-sonnet-4-5' }, {}), [
      'api.anthropic.com',
    ]);
    assert.deepEqual(providerHostsFor({ runtime: 'opencode', model: 'openai/gpt-5' }, {}), [
      'api.openai.com',
    ]);
    assert.deepEqual(providerHostsFor({ runtime: 'opencode', model: 'google/gemini-2.5-pro' }, {}), [
      'generativelanguage.googleapis.com',
    ]);
    assert.deepEqual(providerHostsFor({ runtime: 'opencode', model: 'ollama/llama3' }, {}), []);
  });

  it('uses the host of the base URL in the sandbox env instead, never another provider', () => {
    const env = {
      ANTHROPIC_BASE_URL: 'https://LLM-Gateway.Example.com:8443/anthropic',
      OPENAI_BASE_URL: 'https://openai-gw.example.com/v1',
    };
    assert.deepEqual(providerHostsFor({ runtime: 'claude', model: 'x' }, env), ['llm-gateway.example.com']);
    assert.deepEqual(providerHostsFor({ runtime: 'gemini', model: 'x' }, env), [
      'generativelanguage.googleapis.com',
    ]);
    assert.deepEqual(
      providerHostsFor(
        { runtime: 'gemini', model: 'x' },
        { GOOGLE_GEMINI_BASE_URL: 'http://gemini.test:8080' },
      ),
      ['gemini.test'],
    );
  });

  it('allows nothing for a base URL the egress proxy cannot allow (an IP address, not a URL)', () => {
    for (const url of ['http://10.0.0.5:4000', 'http://[::1]:8080', 'not a url', 'http://localhost:4000']) {
      assert.deepEqual(
        providerHostsFor({ runtime: 'claude', model: 'x' }, { ANTHROPIC_BASE_URL: url }),
        [],
        url,
      );
    }
  });
});
