// Wiring happens here and only here. Services are factories taking their dependencies
// explicitly; tests build the same graph with a test database.
import type { FastifyRequest } from 'fastify';
import { type AuditService, createAuditService } from './audit/audit.service.ts';
import type { Principal } from './auth/principal.ts';
import type { Config } from './config/config.ts';
import type { DatabaseHandle, Db } from './db/database.ts';
import type { Logger } from './observability/logger.ts';
import type { Metrics } from './observability/metrics.ts';

export interface HealthService {
  databaseOk(): Promise<boolean>;
}

export interface Deps {
  version: string;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  database: DatabaseHandle;
  db: Db;
  health: HealthService;
  audit: AuditService;
  /** Credential resolvers tried after the bearer API key (e.g. the browser session cookie). */
  authResolvers: ReadonlyArray<(request: FastifyRequest) => Promise<Principal | null>>;
}

export interface CreateDepsInput {
  version: string;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  database: DatabaseHandle;
}

const READY_TIMEOUT_MS = 2500;

export function createHealthService(database: DatabaseHandle): HealthService {
  return {
    async databaseOk() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
      });
      const probe = database.pool.query('SELECT 1').then(
        () => true,
        () => false,
      );
      try {
        return await Promise.race([probe, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export function createDeps(input: CreateDepsInput): Deps {
  return {
    ...input,
    db: input.database.db,
    health: createHealthService(input.database),
    audit: createAuditService({ db: input.database.db, logger: input.logger, metrics: input.metrics }),
    authResolvers: [],
  };
}
