// Hot read paths as named prepared statements, still written in Kysely.
//
// Building and compiling a Kysely query costs more CPU per request than the database
// round trip it describes, and an unnamed statement is parsed and planned on every call.
// `prepared()` compiles the query once, with sentinel placeholders standing in for the
// parameters, registers its SQL text under a stable name, and runs it through the normal
// Kysely connection (pool or transaction); the pool wrapper in database.ts sends
// registered texts as named pg statements, parsed once per connection.
// Invariants (prepared.test.ts): the parameter order is recovered from the sentinels, so
// a placeholder may appear several times; rows are exactly what Kysely would return
// (same pg type parsers); variable-length lists (`in`) cannot be prepared.
import { createHash } from 'node:crypto';
import {
  type Compilable,
  CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely';
import type { Db } from './database.ts';
import type { Database } from './schema.ts';
import { registerStatementName } from './statement-names.ts';

/** A Kysely that only compiles (it has no connection): prepared statements are module-level. */
const compiler: Db = new Kysely<Database>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

const SENTINEL = '\u0000paddock-param:';

export interface Prepared<P extends Record<string, unknown>, R> {
  /** All rows. */
  all(db: Db, params: P): Promise<R[]>;
  /** The first row, or undefined. */
  first(db: Db, params: P): Promise<R | undefined>;
}

export function prepared<P extends Record<string, unknown>, R>(
  label: string,
  build: (db: Db, p: P) => Compilable<R>,
): Prepared<P, R> {
  let compiled: { text: string; order: (keyof P)[] } | undefined;
  const compile = (params: P) => {
    const sentinels = Object.fromEntries(
      Object.keys(params).map((k) => [k, `${SENTINEL}${k}`]),
    ) as unknown as P;
    const query = build(compiler, sentinels).compile();
    const order = query.parameters.map((value) => {
      if (typeof value !== 'string' || !value.startsWith(SENTINEL)) {
        throw new Error(`prepared(${label}): every parameter must come from the placeholders`);
      }
      return value.slice(SENTINEL.length) as keyof P;
    });
    const digest = createHash('sha256').update(query.sql).digest('hex').slice(0, 16);
    registerStatementName(query.sql, `${label}_${digest}`);
    return { text: query.sql, order };
  };
  const all = async (db: Db, params: P): Promise<R[]> => {
    compiled ??= compile(params);
    const values = compiled.order.map((k) => params[k]);
    const res = await db.executeQuery<R>(CompiledQuery.raw(compiled.text, values));
    return [...res.rows];
  };
  return {
    all,
    first: async (db, params) => (await all(db, params))[0],
  };
}
