// Issue 35, finding 7: a failed provisioning's reason passes the conversation's redactor
// everywhere it is kept or logged (the conversation's failure_reason, the sandbox's reason, the
// turn's error, the server's log lines), not only in the stage message. Real PostgreSQL, the real
// sandboxd; the clone fails because the repository's host does not resolve.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { secretForms } from '../src/conversations/log/secret-forms.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';

// A value that is valid in a repository path and as a ref, and that the clone error names twice.
const SECRET = 'ref-Secret-9f8e7d6c5b4a';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness();
});
after(async () => {
  await h?.close();
});

function assertNoForm(text: string, where: string): void {
  for (const form of secretForms(SECRET)) {
    assert.ok(!text.includes(form.toString('utf8')), `${where} holds ${JSON.stringify(form.toString())}`);
  }
}

describe('a failed provisioning', () => {
  it('keeps and logs its reason redacted: failure_reason, sandbox reason, turn error, server log', async () => {
    const user = await h.user();
    const vault = await h.vault(user);
    const put = await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'REF', value: SECRET });
    assert.equal(put.status, 201);
    const environment = await h.environment(user, {
      repos: [{ url: `https://git.invalid/acme/${SECRET}.git`, ref: SECRET }],
    });
    const agent = await h.agent(user, { environment_id: environment, vault_ids: [vault] });
    const logsBefore = h.logs.length;
    const conv = await h.start(user, { agent_id: agent, vault_id: vault, prompt: 'true' });
    const failed = await h.waitFor(user, conv.id, (c) => c.status === 'failed', 60_000);

    // The reason is still useful: it names the stage and what failed, the secret replaced.
    assert.match(failed.failure_reason ?? '', /clon/);
    assert.ok(failed.failure_reason?.includes(REDACTION_MARKER), failed.failure_reason ?? '');
    assertNoForm(failed.failure_reason ?? '', 'failure_reason');
    assert.equal(failed.sandbox?.status, 'failed');
    assertNoForm(failed.sandbox?.reason ?? '', 'the sandbox reason (API)');
    const [turn] = await h.turns(user, conv.id);
    assert.equal(turn?.status, 'failed');
    assert.ok(turn?.error?.includes(REDACTION_MARKER), turn?.error ?? '');
    assertNoForm(turn?.error ?? '', "the turn's error");

    // What is stored, read past the API.
    const conversation = await h.deps.db
      .selectFrom('conversations')
      .select('failure_reason')
      .where('id', '=', conv.id)
      .executeTakeFirstOrThrow();
    assertNoForm(conversation.failure_reason ?? '', 'conversations.failure_reason');
    const sandboxes = await h.deps.db
      .selectFrom('sandboxes')
      .select('reason')
      .where('conversation_id', '=', conv.id)
      .execute();
    assert.ok(sandboxes.length > 0);
    for (const row of sandboxes) assertNoForm(row.reason ?? '', 'sandboxes.reason');
    const turns = await h.deps.db
      .selectFrom('turns')
      .select('error')
      .where('conversation_id', '=', conv.id)
      .execute();
    for (const row of turns) assertNoForm(row.error ?? '', 'turns.error');
    const events = await h.events(conv.id);
    assertNoForm(JSON.stringify(events), 'the log');

    // The server's log output: the provisioning failure was logged, without the secret.
    const logged = h.logs.slice(logsBefore).join('');
    assert.match(logged, /provisioning failed/);
    assertNoForm(logged, "the server's log");
  });
});
