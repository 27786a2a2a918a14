// Stand-in for the provisioner (provisioner.ts, issue 9 deliverable 3) until it lands on this
// branch: the same Provisioner contract, `provision` stage only — it creates (or adopts) the
// backend sandbox, mints the callback key, registers it with the redactor before anything is
// written, writes the mode-600 env file and moves the sandbox row pending → starting → ready.
// No environment secrets, packages, network policy, clone, setup, skills or session state.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Db } from '../db/database.ts';
import {
  ProvisionError,
  type Provisioned,
  type Provisioner,
  type ProvisionInput,
  StaleOwnerError,
} from './contracts.ts';
import { ownerSetSandbox } from './owner-writes.repo.ts';
import { PADDOCK_DIR } from './turn.ts';

export function createBasicProvisioner(deps: {
  db: Db;
  sandbox: SandboxClient;
  callbackBaseUrl: string;
  mintCallbackKey(tenantId: string, conversationId: string): Promise<{ id: string; key: string }>;
}): Provisioner {
  const { sandbox } = deps;

  const envFile = (env: Record<string, string>) =>
    `${Object.entries(env)
      .map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'`)
      .join('\n')}\n`;

  const writeEnv = async (input: ProvisionInput): Promise<Provisioned> => {
    const key = await deps.mintCallbackKey(input.lease.tenantId, input.lease.conversationId);
    input.registry.register(key.key);
    const env = {
      PADDOCK_TOKEN: key.key,
      SERVICE_TOKEN: key.key,
      PADDOCK_BASE_URL: deps.callbackBaseUrl,
      SERVICE_BASE_URL: deps.callbackBaseUrl,
      PADDOCK_CONVERSATION_ID: input.lease.conversationId,
    };
    await sandbox.writeFile(input.sandboxName, `${PADDOCK_DIR}/env`, envFile(env), {
      mode: 0o600,
      mkdirParents: true,
      retry: true,
    });
    return { env, mcpServers: input.agent.mcpServers, callbackKeyId: key.id, path: 'cold' };
  };

  return {
    async provision(input) {
      const t0 = Date.now();
      await input.writer.stage({ stage: 'provision', state: 'started' });
      try {
        await ownerSetSandbox(deps.db, input.lease, input.sandboxId, 'starting');
        await sandbox.create(input.sandboxName);
        const provisioned = await writeEnv(input);
        await ownerSetSandbox(deps.db, input.lease, input.sandboxId, 'ready');
        await input.writer.stage({ stage: 'provision', state: 'done', durationMs: Date.now() - t0 });
        return provisioned;
      } catch (err) {
        if (input.signal.aborted || err instanceof StaleOwnerError) throw err;
        const message = 'the sandbox could not be created';
        await input.writer.stage({
          stage: 'provision',
          state: 'failed',
          durationMs: Date.now() - t0,
          message,
        });
        throw new ProvisionError('provision', message);
      }
    },
    refreshEnv: writeEnv,
    async saveSession() {},
    async restoreSession() {
      return false;
    },
  };
}
